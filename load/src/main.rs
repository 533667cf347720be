//! `buzz-load`: the load tool's binary (see the library for what it does).

fn main() -> std::process::ExitCode {
    buzz_load::main()
}
