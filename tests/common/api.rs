//! The read API served in-process over a processed data directory.

use super::http::Client;
use feedlog::api::http::ApiConfig;
use feedlog::ingest::produce::Producer;
use feedlog::ops::asof::Retention;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use std::path::Path;

/// The API served on an ephemeral loopback port until dropped.
pub struct Server {
    pub client: Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(processor: &Processor, cfg: ApiConfig) -> Server {
        Server::serve(feedlog::ops::serve::processor_api(
            processor,
            Retention::Forever,
            cfg,
        ))
    }

    /// Serves `api`.
    pub fn serve(api: std::sync::Arc<feedlog::Api>) -> Server {
        let (rt, listener, addr) = super::http::ephemeral_listener();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            rt.block_on(feedlog::api::http::serve(listener, api, async {
                let _ = rx.await;
            }))
            .unwrap();
        });
        Server {
            client: Client { addr },
            stop: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

/// A processed data directory over `log`, with a small inbox so timeline
/// pages run through the pull path too.
pub fn processed(dir: &Path, log: &str, partitions: u32) -> Processor {
    processed_with(dir, log, partitions, ProcessorConfig::default())
}

/// [`processed`] with `config`'s settings but for a small inbox cap and
/// fan-out chunk, without fsyncs.
pub fn processed_with(
    dir: &Path,
    log: &str,
    partitions: u32,
    config: ProcessorConfig,
) -> Processor {
    let data = DataDir::create_or_open(dir, Some(partitions)).unwrap();
    let mut producer = Producer::new(&data).unwrap();
    producer.json_lines(log.as_bytes(), "log").unwrap();
    producer.finish().unwrap();
    let processor = Processor::open(
        &data,
        ProcessorConfig {
            inbox_cap: 5,
            fanout_chunk: 3,
            sync: false,
            ..config
        },
    )
    .unwrap();
    processor
        .run(&feedlog::task::Shutdown::new(), true)
        .unwrap();
    processor
}

pub fn wide_limits() -> ApiConfig {
    ApiConfig {
        max_limit: 1000,
        ..ApiConfig::default()
    }
}

/// Appends JSON-lines events to the embedded log of `dir`.
/// Appends `lines` (JSON events) to the log in `dir` and has `processor`
/// apply everything until idle.
pub fn append_and_process(dir: &Path, processor: &Processor, lines: &[&str]) {
    append(dir, &lines.join("\n"));
    processor
        .run(&feedlog::task::Shutdown::new(), true)
        .unwrap();
}

pub fn append(dir: &Path, lines: &str) {
    let data = DataDir::open(dir).unwrap();
    let mut producer = Producer::new(&data).unwrap();
    producer.json_lines(lines.as_bytes(), "test").unwrap();
    producer.finish().unwrap();
}
