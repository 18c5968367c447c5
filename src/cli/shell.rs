//! What every long-running command shares: a shutdown on Ctrl-C or
//! SIGTERM, a progress ticker, scratch directories, and the HTTP API's
//! server thread.

use crate::cli::say::say;
use anyhow::{bail, Context, Result};
use feedlog::api::http::{self, Api, ApiConfig};
use feedlog::task::Shutdown;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A shutdown requested on the first Ctrl-C (or SIGTERM): long-running
/// commands finish their current batches and stop cleanly. Returns once
/// the signals are watched, so a SIGTERM sent after it never kills the
/// process outright.
pub fn shutdown_on_signal() -> Shutdown {
    let shutdown = Shutdown::new();
    let token = shutdown.clone();
    let (watching, watched) = std::sync::mpsc::sync_channel::<()>(1);
    let watch = move || -> std::io::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate())?;
            let mut int = signal(SignalKind::interrupt())?;
            let _ = watching.send(());
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            say!("stopping: finishing the current batches");
            token.request();
            Ok(())
        })
    };
    let spawned = std::thread::Builder::new()
        .name("feedlog-signals".into())
        .spawn(move || {
            if let Err(e) = watch() {
                tracing::warn!(error = %e, "cannot watch for Ctrl-C and SIGTERM");
            }
        });
    match spawned {
        // An error drops the sender: no wait then.
        Ok(_) => {
            let _ = watched.recv();
        }
        Err(e) => tracing::warn!(error = %e, "cannot watch for Ctrl-C and SIGTERM"),
    }
    shutdown
}

/// A scratch directory removed on drop.
pub struct ScratchDir(pub PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn tempfile_dir(what: &str) -> Result<ScratchDir> {
    let p = std::env::temp_dir().join(format!("feedlog-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
    Ok(ScratchDir(p))
}

/// The HTTP read API, served on its own runtime thread.
pub struct ApiServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
}

/// A bound listener, not serving yet (its address is known).
pub struct BoundApi {
    rt: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
}

impl BoundApi {
    /// Binds `addr`, refusing (before anything else starts) to expose the
    /// API beyond loopback without a token unless `cfg` allows it.
    pub fn bind(addr: &str, cfg: &ApiConfig) -> Result<BoundApi> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.workers())
            .thread_name("feedlog-http")
            .enable_all()
            .build()?;
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(addr))
            .with_context(|| {
                format!("listening on {addr} (is another server using it? pick one with --listen)")
            })?;
        let addr = listener.local_addr()?;
        if let Some(why) = http::exposure_error(&addr, cfg) {
            bail!("{why}");
        }
        if cfg.token.is_none() && !addr.ip().is_loopback() {
            tracing::warn!(%addr, "serving the read API without authentication beyond loopback (--insecure-no-auth)");
        }
        Ok(BoundApi { rt, listener, addr })
    }

    /// Serves `api` on the bound address, on the listener's runtime.
    pub fn serve(self, api: Arc<Api>) -> Result<ApiServer> {
        let BoundApi { rt, listener, addr } = self;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("feedlog-http".into())
            .spawn(move || {
                rt.block_on(http::serve(listener, api, async {
                    let _ = rx.await;
                }))
            })?;
        say!("serving the read API on http://{addr} (see http://{addr}/openapi.json)");
        Ok(ApiServer {
            stop: Some(tx),
            thread: Some(thread),
            addr,
        })
    }
}

impl ApiServer {
    /// Binds `addr` and serves the API `make` builds with the settings.
    pub fn start(
        addr: &str,
        cfg: ApiConfig,
        make: impl FnOnce(ApiConfig) -> Arc<Api>,
    ) -> Result<ApiServer> {
        let bound = BoundApi::bind(addr, &cfg)?;
        bound.serve(make(cfg))
    }

    /// Stops serving (after a moment for open streams) and waits.
    pub fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Err(e)) => say!("error: the read API stopped: {e}"),
                Err(_) => say!("error: the read API thread panicked"),
                Ok(Ok(())) => {}
            }
        }
    }
}

/// How often long-running commands print a progress line.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// How `run` goes: until idle or for good, and how often it prints a
/// progress line (`None`: never).
#[derive(Debug, Clone, Copy)]
pub struct RunMode {
    /// Exit once everything is consumed and nothing is in flight.
    pub until_idle: bool,
    /// Time between progress lines.
    pub progress: Option<Duration>,
}

impl RunMode {
    /// `--progress` and `--quiet`: quiet prints no progress lines; else
    /// the interval asked for, by default [`PROGRESS_EVERY`] on a terminal
    /// and a minute otherwise (a service's log gets a line a minute, not
    /// 43,000 a day).
    pub fn new(until_idle: bool, progress: Option<Duration>, quiet: bool) -> RunMode {
        use std::io::IsTerminal;
        let default = if std::io::stderr().is_terminal() {
            PROGRESS_EVERY
        } else {
            Duration::from_secs(60)
        };
        RunMode {
            until_idle,
            progress: (!quiet).then(|| progress.unwrap_or(default)),
        }
    }

    /// Runs `work`, printing progress with `tick` as this mode says.
    pub fn with_progress<R: Send>(&self, tick: impl Fn() + Sync, work: impl FnOnce() -> R) -> R {
        match self.progress {
            Some(interval) => every(interval, tick, work),
            None => work(),
        }
    }
}

/// Runs `work`, calling `tick` every `interval` until it returns.
pub fn every<R: Send>(interval: Duration, tick: impl Fn() + Sync, work: impl FnOnce() -> R) -> R {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = Instant::now();
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(interval.min(Duration::from_millis(100)));
                if last.elapsed() >= interval {
                    last = Instant::now();
                    tick();
                }
            }
        });
        let r = work();
        done.store(true, Ordering::SeqCst);
        r
    })
}

/// Formats a rate for progress lines.
pub fn per_sec(count: u64, since: Instant) -> f64 {
    count as f64 / since.elapsed().as_secs_f64().max(1e-9)
}
