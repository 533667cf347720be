//! `sqlx::migrate!` embeds the migrations folder at compile time; rebuild when it changes.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
