//! The command line, parsed once: `buzz-load [FLAGS]` runs the one-process tool ([`crate::single`]);
//! `buzz-load <COMMAND> [FLAGS]` runs one command of the distributed tester
//! ([`crate::distributed`]). Each command's `main` takes its parsed flags and returns the exit code.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::distributed::check::CheckArgs;
use crate::distributed::coordinator::args::CoordinatorArgs;
use crate::distributed::coordinator::fi_flip::FiIssuersArgs;
use crate::distributed::proxy::ProxyArgs;
use crate::distributed::worker::WorkerArgs;
use crate::{distributed, process, single};

/// Load generator for buzz-relay and other Nostr relays.
///
/// Without a command: opens N publisher connections that publish signed kind-9 events into one
/// channel and M subscriber connections subscribed to it, then reports accepted events/s,
/// rejections, OK latency (EVENT sent → OK received) and live delivery latency (EVENT sent → a
/// subscriber receives it). Every run is bounded: the send window ends after --duration seconds or
/// --events events, then outstanding OKs and deliveries get --drain-timeout seconds.
///
/// The commands run the distributed tester (a coordinator and workers meeting over NATS), judge
/// its audit, and serve the fault suite.
#[derive(Debug, Parser)]
#[command(name = "buzz-load", version, propagate_version = true, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// A distributed tester's command; none runs the one-process tool.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The one-process tool's flags.
    #[command(flatten)]
    pub single: single::config::Args,
}

/// The distributed tester's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    Coordinator(Box<CoordinatorArgs>),
    Worker(WorkerArgs),
    Check(CheckArgs),
    Proxy(ProxyArgs),
    FiIssuers(FiIssuersArgs),
}

/// Parses `argv` (the program name first) and runs what it names; the exit code of the command.
pub fn run<I, T>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => return process::clap_exit(&e),
    };
    match cli.command {
        None => single::main(cli.single),
        Some(Command::Coordinator(a)) => distributed::coordinator::main(&a),
        Some(Command::Worker(a)) => distributed::worker::main(&a),
        Some(Command::Check(a)) => distributed::check::main(&a),
        Some(Command::Proxy(a)) => distributed::proxy::main(&a),
        Some(Command::FiIssuers(a)) => distributed::coordinator::fi_flip::issuers_main(&a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::single::config::Config;

    const KEY: &str = "0000000000000000000000000000000000000000000000000000000000000001";

    fn parse(line: &str) -> Cli {
        let argv = std::iter::once("buzz-load").chain(line.split_whitespace());
        Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn single(line: &str) -> Config {
        let cli = parse(line);
        assert!(cli.command.is_none(), "{line}");
        Config::try_from(cli.single).unwrap_or_else(|e| panic!("{line}: {e:#}"))
    }

    #[test]
    fn the_one_process_command_lines_of_the_chart_the_scripts_and_the_docs_run_the_one_process_tool() {
        // templates/tests/roundtrip.yaml (`helm test`) and scripts/image-test.sh (owner key from
        // BUZZ_LOAD_OWNER_SECRET there).
        let c = single(&format!(
            "--mode=buzz --url=ws://buzz-gateway:7777 --host-header=localhost --publishers=1 \
             --subscribers=1 --events=5 --require-complete --owner-secret={KEY}"
        ));
        assert!(c.require_complete && c.events == Some(5) && c.targets[0].host == "localhost");
        // scripts/load.sh, scripts/bench-compare.sh, load/README.md.
        let c = single(&format!(
            "--mode buzz --url ws://127.0.0.1:7777 --operator-url http://127.0.0.1:9000/ \
             --operator-secret {KEY} --json /tmp/load.json --publishers 8 --duration 20"
        ));
        assert_eq!(c.community.operator_url.as_deref(), Some("http://127.0.0.1:9000"));
        single("--mode plain --url ws://127.0.0.1:7777 --json /tmp/x.json --publishers 8 --in-flight 8 --duration 10");
        single("--url ws://127.0.0.1:7777 --rate 2000 --events 10000");
        let c = single(&format!(
            "--mode buzz --url ws://127.0.0.1:7777 --url ws://127.0.0.1:7778 --host-header localhost:7777 \
             --owner-secret {KEY}"
        ));
        assert!(c.targets.iter().all(|t| t.host == "localhost:7777") && c.targets.len() == 2);
    }

    #[test]
    fn the_coordinator_command_lines_of_the_benchmarks_and_the_docs_give_a_plan() {
        // scripts/bench-distributed.sh and load/README.md (through scripts/load-cluster.sh, which
        // adds --spawn-workers, the --urls, --host-header and the operator flags).
        let base = format!(
            "coordinator --spawn-workers 2 --url ws://127.0.0.1:1 --host-header load.localhost \
             --operator-url http://127.0.0.1:2 --operator-secret {KEY}"
        );
        for tail in [
            "--scenario fanout --subscribers 1000 --rate 20 --duration 20 --json /tmp/f.json --svg /tmp/f.svg",
            "--scenario idle --clients 10000 --duration 30 --json /tmp/i.json --svg /tmp/i.svg",
            "--scenario chat --clients 16 --in-flight 8 --duration 15 --json /tmp/c.json --svg /tmp/c.svg",
        ] {
            let Some(Command::Coordinator(a)) = parse(&format!("{base} {tail}")).command else {
                panic!("not the coordinator: {tail}")
            };
            assert!(a.validate().is_ok(), "{tail}");
        }
        let cli = parse(&format!(
            "coordinator --run-id demo --workers 2 --scenario workday --clients 40 --url ws://127.0.0.1:7777 \
             --host-header team.example --owner-secret {KEY}"
        ));
        assert!(matches!(cli.command, Some(Command::Coordinator(a)) if a.validate().is_ok()));
    }

    #[test]
    fn the_distributed_command_lines_of_the_chart_and_the_scripts_run_their_commands() {
        // templates/load-job.yaml (coordinator and worker), with values.yaml's loadTest.args.
        let cli = parse(&format!(
            "coordinator --run-id=buzz-1 --workers=2 --scenario=chat --url=ws://buzz-gateway:7777 \
             --host-header=load.example --owner-secret={KEY} --clients 8 --subscribers 8 --duration 60"
        ));
        let Some(Command::Coordinator(a)) = cli.command else { panic!("not the coordinator") };
        assert_eq!(a.workers, 2);
        assert!(a.validate().is_ok());
        assert!(
            matches!(parse("worker --run-id=buzz-1").command, Some(Command::Worker(w)) if w.run_id == "buzz-1")
        );
        // scripts/faults.sh, with scripts/upgrade-test.sh's --replay-margin (load-cluster.sh uses a
        // subset).
        let cli = parse(&format!(
            "coordinator --nats-url nats://127.0.0.1:4333 --spawn-workers 2 --url ws://127.0.0.1:1 \
             --url ws://127.0.0.1:2 --host-header f1-ab.faults.localhost --endpoints-file /tmp/e \
             --reconnect --audit /tmp/a --operator-url http://127.0.0.1:3 --operator-secret {KEY} \
             --fi-issuer https://issuer.faults.test --fi-seed ab --scenario workday --clients 30 \
             --subscribers 20 --weights chat=45,artifacts=25,fi=5 --think-scale 0.2 --snapshot-readers 4 \
             --connect-timeout 6 --duration 60 --drain-timeout 15 --json /tmp/l.json --stall-listeners 20:30 \
             --replay-margin 60"
        ));
        let Some(Command::Coordinator(a)) = cli.command else { panic!("not the coordinator") };
        assert!(a.validate().is_ok());
        assert_eq!(a.stall_listeners_ms().ok(), Some(Some((20_000, 30_000))));
        let cli = parse(
            "check --audit /tmp/a --database-url postgres://x --fail-on-timeouts --json /tmp/c.json \
             --markdown /tmp/c.md --note fault=x --note coordinator_exit=0",
        );
        assert!(matches!(cli.command, Some(Command::Check(c)) if c.fail_on_timeouts && c.notes.len() == 2));
        let cli = parse("proxy --listen 127.0.0.1:1 --upstream 127.0.0.1:2 --control 127.0.0.1:3");
        assert!(matches!(cli.command, Some(Command::Proxy(_))));
        let cli = parse("fi-issuers --issuer https://issuer.faults.test --seed ab");
        assert!(matches!(cli.command, Some(Command::FiIssuers(f)) if f.seed == "ab"));
    }

    #[test]
    fn the_flags_of_one_part_are_refused_by_the_other() {
        let refused = |line: &str| {
            Cli::try_parse_from(std::iter::once("buzz-load").chain(line.split_whitespace())).is_err()
        };
        assert!(refused("--publishers 2 coordinator --workers 1"));
        assert!(refused("coordinator --workers 1 --publishers 2"));
        assert!(refused("worker --run-id r --clients 2"));
        assert!(refused("nonsense"));
    }
}
