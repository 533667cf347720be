//! `buzz`: the operator tool of buzz-relay. Migrate the database, run the whole relay locally,
//! provision communities and members.

mod admin;
mod dev;
mod http;
mod migrate;
mod nip_fi;

use clap::{Parser, Subcommand};

/// mimalloc: glibc malloc was about 10 % of the relay's CPU under load (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "buzz", version, about = "buzz-relay operator tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply pending database migrations.
    Migrate {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// Apply only the migrations up to this version (default: every one this build knows).
        #[arg(long)]
        to_version: Option<i64>,
    },
    /// Run all five services in one process on loopback (local development).
    Dev(Box<dev::command::DevArgs>),
    /// Print a new secret key and its public key.
    Keygen,
    /// Operator API calls (NIP-98 signed with an operator key).
    #[command(subcommand)]
    Operator(http::OperatorCommand),
    /// Community member management (NIP-98 signed by the owner or an admin).
    #[command(subcommand)]
    Members(http::MembersCommand),
    /// NIP-86 community management: one call, NIP-98 signed by the owner or an admin
    /// (`buzz admin supportedmethods` lists the methods).
    Admin(admin::AdminArgs),
    /// Every current artifact of a query through the NIP-AR snapshot transport (reference client).
    Snapshot(buzz_cli::snapshot::command::SnapshotArgs),
}

/// Exit codes: 0 success, 1 usage or local error, 5 request, transport or response error;
/// `operator nip-fi` adds 10 pending, 11 superseded, 12 unavailable (receipt states).
#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Migrate { database_url, to_version } => {
            report(migrate::run(&database_url, to_version).await, 1)
        }
        // Boxed: the whole relay's start-up is a large future.
        Command::Dev(args) => report(Box::pin(dev::command::run(*args)).await, 1),
        Command::Keygen => {
            let keys = buzz_core::Keys::generate();
            println!("{{\"secret_key\":\"{}\",\"pubkey\":\"{}\"}}", keys.secret_hex(), keys.public_hex());
            0
        }
        Command::Operator(cmd) => http::operator(cmd).await,
        Command::Members(cmd) => http::members(cmd).await,
        Command::Admin(args) => admin::run(args).await,
        Command::Snapshot(args) => buzz_cli::snapshot::command::run(args).await,
    };
    std::process::exit(code);
}

fn report(r: anyhow::Result<()>, code: i32) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            code
        }
    }
}
