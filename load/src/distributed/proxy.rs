//! `buzz-load proxy --listen ADDR --upstream ADDR --control ADDR`: a TCP proxy the fault suite
//! (`scripts/faults.sh`) puts between one service and NATS or PostgreSQL, to slow or cut that
//! one link. Loopback only: every address must be a loopback address.
//!
//! The control port takes one command per line and answers `ok <mode>` (or `error: ...`):
//!
//! | command | effect |
//! | --- | --- |
//! | `pass` | forward as is |
//! | `delay MS` | every chunk, in each direction, is forwarded MS ms after it was read (order kept) |
//! | `hold` | nothing is forwarded either way: bytes read wait in the proxy and new connections wait unconnected (a black hole: a partition its peers see as silence, never as a reset; TCP would retransmit, so what waited is delivered, in order, when the mode changes back) |
//! | `cut` | every open connection is closed and new ones are closed at once (a partition a peer sees as resets) |
//! | `mode` | answers the mode in effect |

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::process;

/// A controllable loopback TCP proxy: the fault suite puts one between a service and NATS or
/// PostgreSQL to slow or cut that link (`pass`, `delay MS`, `hold`, `cut` on its control port).
#[derive(Debug, Clone, clap::Args)]
pub struct ProxyArgs {
    /// Where clients connect (loopback).
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Where their connections go (loopback).
    #[arg(long, value_name = "ADDR")]
    pub upstream: SocketAddr,
    /// The control port (loopback): `pass`, `delay MS`, `hold`, `cut`, `mode`.
    #[arg(long, value_name = "ADDR")]
    pub control: SocketAddr,
}

/// What the proxy does to traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward as is.
    Pass,
    /// Forward each chunk this long after it was read.
    Delay(Duration),
    /// Forward nothing until the mode changes (a black hole).
    Hold,
    /// Close every connection, accept none.
    Cut,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pass => f.write_str("pass"),
            Self::Delay(d) => write!(f, "delay {}", d.as_millis()),
            Self::Hold => f.write_str("hold"),
            Self::Cut => f.write_str("cut"),
        }
    }
}

/// Parses one control line: `Ok(None)` for `mode` (a question).
pub fn parse_command(line: &str) -> Result<Option<Mode>> {
    let mut words = line.split_whitespace();
    let mode = match (words.next(), words.next(), words.next()) {
        (Some("pass"), None, None) => Mode::Pass,
        (Some("cut"), None, None) => Mode::Cut,
        (Some("hold"), None, None) => Mode::Hold,
        (Some("mode"), None, None) => return Ok(None),
        (Some("delay"), Some(ms), None) => {
            Mode::Delay(Duration::from_millis(ms.parse().with_context(|| format!("delay {ms:?}: not ms"))?))
        }
        _ => bail!("unknown command {line:?} (pass, delay MS, hold, cut, mode)"),
    };
    Ok(Some(mode))
}

/// `buzz-load proxy ...`: runs until killed; 2 on bad flags, 1 when it cannot bind.
#[must_use]
pub fn main(args: &ProxyArgs) -> ExitCode {
    const WHO: &str = "buzz-load proxy";
    for a in [args.listen, args.upstream, args.control] {
        if !a.ip().is_loopback() {
            eprintln!("{WHO}: {a} is not a loopback address (the proxy only runs on loopback)");
            return ExitCode::from(process::BAD_FLAGS);
        }
    }
    let serve = async {
        let (listener, control) = bind(args).await?;
        run(listener, control, args.upstream).await
    };
    match process::block_on(WHO, Some(2), serve) {
        Ok(result) => process::finished(WHO, result),
        Err(code) => code,
    }
}

async fn bind(args: &ProxyArgs) -> Result<(TcpListener, TcpListener)> {
    let l = TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let c = TcpListener::bind(args.control).await.with_context(|| format!("binding {}", args.control))?;
    Ok((l, c))
}

/// Serves the proxy on `listener` and its control on `control` until an accept fails.
pub async fn run(listener: TcpListener, control: TcpListener, upstream: SocketAddr) -> Result<()> {
    let (tx, rx) = watch::channel(Mode::Pass);
    tokio::spawn(serve_control(control, tx));
    loop {
        let (client, _) = listener.accept().await.context("accept")?;
        let rx = rx.clone();
        if *rx.borrow() == Mode::Cut {
            drop(client);
            continue;
        }
        tokio::spawn(async move {
            // A held link connects nothing: the client waits, as behind a black hole.
            let mut held = rx.clone();
            if held.wait_for(|m| *m != Mode::Hold).await.map_or(true, |m| *m == Mode::Cut) {
                return;
            }
            let Ok(server) = TcpStream::connect(upstream).await else { return };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            connection(client, server, rx).await;
        });
    }
}

async fn serve_control(control: TcpListener, tx: watch::Sender<Mode>) {
    while let Ok((sock, _)) = control.accept().await {
        let tx = tx.clone();
        tokio::spawn(async move {
            let (r, mut w) = sock.into_split();
            let mut lines = BufReader::new(r).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let reply = match parse_command(&line) {
                    Ok(Some(m)) => {
                        tx.send_replace(m);
                        format!("ok {m}\n")
                    }
                    Ok(None) => format!("ok {}\n", *tx.borrow()),
                    Err(e) => format!("error: {e:#}\n"),
                };
                if w.write_all(reply.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// Pumps both directions until either side closes or the mode becomes `Cut`.
async fn connection(client: TcpStream, server: TcpStream, mut rx: watch::Receiver<Mode>) {
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = pump(cr, sw, rx.clone());
    let down = pump(sr, cw, rx.clone());
    let cut = async {
        while rx.changed().await.is_ok() {
            if *rx.borrow() == Mode::Cut {
                return;
            }
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
        () = cut => {}
    }
}

/// One direction: reads chunks and writes each at its due time (read time + the delay then in
/// effect), in order.
async fn pump(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    rx: watch::Receiver<Mode>,
) {
    let (tx, mut queue) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut held = rx.clone();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let delay = match *rx.borrow() {
                        Mode::Delay(d) => d,
                        Mode::Pass | Mode::Hold | Mode::Cut => Duration::ZERO,
                    };
                    if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = queue.recv().await {
            tokio::time::sleep_until(due).await;
            // Held: nothing is written until the mode changes (a cut ends the connection).
            if held.wait_for(|m| *m != Mode::Hold).await.is_err() {
                return;
            }
            if w.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = w.shutdown().await;
    };
    // The writer ends after the reader (its queue closes) or on a write error.
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> Result<SocketAddr> {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = l.local_addr()?;
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        Ok(addr)
    }

    async fn proxy(upstream: SocketAddr) -> Result<(SocketAddr, SocketAddr)> {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let c = TcpListener::bind("127.0.0.1:0").await?;
        let addrs = (l.local_addr()?, c.local_addr()?);
        tokio::spawn(run(l, c, upstream));
        Ok(addrs)
    }

    async fn command(control: SocketAddr, line: &str) -> Result<String> {
        let mut s = TcpStream::connect(control).await?;
        s.write_all(format!("{line}\n").as_bytes()).await?;
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).await?;
        Ok(reply.trim().to_owned())
    }

    async fn round_trip(s: &mut TcpStream) -> Result<Duration> {
        let t0 = std::time::Instant::now();
        s.write_all(b"ping").await?;
        let mut got = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut got)).await??;
        assert_eq!(&got, b"ping");
        Ok(t0.elapsed())
    }

    #[test]
    fn commands_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_command("pass").ok(), Some(Some(Mode::Pass)));
        assert_eq!(parse_command(" cut ").ok(), Some(Some(Mode::Cut)));
        assert_eq!(parse_command("delay 200").ok(), Some(Some(Mode::Delay(Duration::from_millis(200)))));
        assert_eq!(parse_command("hold").ok(), Some(Some(Mode::Hold)));
        assert_eq!(parse_command("mode").ok(), Some(None));
        assert!(parse_command("delay x").is_err());
        assert!(parse_command("drop everything").is_err());
    }

    #[tokio::test]
    async fn traffic_passes_is_delayed_each_way_held_and_a_cut_closes_and_refuses() -> Result<()> {
        let (listen, control) = proxy(echo_server().await?).await?;
        let mut s = TcpStream::connect(listen).await?;
        assert!(round_trip(&mut s).await? < Duration::from_millis(150));

        assert_eq!(command(control, "delay 150").await?, "ok delay 150");
        let rtt = round_trip(&mut s).await?;
        assert!(rtt >= Duration::from_millis(300), "round trip {rtt:?} under 2 × 150 ms");

        assert_eq!(command(control, "hold").await?, "ok hold");
        s.write_all(b"ping").await?;
        let mut got = [0u8; 4];
        let held = tokio::time::timeout(Duration::from_millis(400), s.read_exact(&mut got)).await;
        assert!(held.is_err(), "nothing comes back while held");
        let mut late = TcpStream::connect(listen).await?;
        late.write_all(b"ping").await?;
        assert!(tokio::time::timeout(Duration::from_millis(300), late.read_exact(&mut got)).await.is_err());
        assert_eq!(command(control, "pass").await?, "ok pass");
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut got)).await??;
        assert_eq!(&got, b"ping", "what was held is delivered when the link heals");
        tokio::time::timeout(Duration::from_secs(5), late.read_exact(&mut got)).await??;
        assert_eq!(&got, b"ping", "a connection made while held is connected when the link heals");

        assert_eq!(command(control, "cut").await?, "ok cut");
        let mut buf = [0u8; 4];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await??;
        assert_eq!(n, 0, "the open connection is closed");
        let mut t = TcpStream::connect(listen).await?;
        let n = tokio::time::timeout(Duration::from_secs(5), t.read(&mut buf)).await?.unwrap_or(0);
        assert_eq!(n, 0, "a new connection is closed at once");

        assert_eq!(command(control, "pass").await?, "ok pass");
        assert_eq!(command(control, "mode").await?, "ok pass");
        let mut s = TcpStream::connect(listen).await?;
        assert!(round_trip(&mut s).await? < Duration::from_millis(150));
        Ok(())
    }
}
