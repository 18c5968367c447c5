//! The blocking HTTP/1.1 client of processor-to-processor reads in Kafka
//! mode (forwarded requests, remote outboxes), on `ureq`: one agent for the
//! process, whose pool keeps connections to each processor alive between
//! requests, and a resolver that keeps each processor's address for a few
//! seconds. It runs on the API's blocking pool, like the RocksDB reads it
//! stands in for.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// A response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`, if any.
    pub content_type: Option<String>,
    /// `Link`, if any (paged answers).
    pub link: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not `http://host:port`.
    #[error("not an http://host:port address: {0:?}")]
    BadUrl(String),
    /// Connecting, sending or reading failed, or the answer is not HTTP.
    #[error("{url}: {reason}")]
    Failed {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
}

impl ClientError {
    /// Skip, retry or stop: an address that is none needs its user; a
    /// processor that does not answer may answer later.
    pub fn disposition(&self) -> crate::core::Disposition {
        match self {
            ClientError::BadUrl(_) => crate::core::Disposition::Stop,
            ClientError::Failed { .. } => crate::core::Disposition::Retry,
        }
    }
}

/// The most bytes of one answer: a page at the API's largest limit is far
/// below it.
const MAX_BODY: u64 = 64 << 20;

/// Idle connections kept per processor: one per blocking-pool thread that
/// forwards at the same moment, within reason.
const IDLE_PER_HOST: usize = 32;

/// How long connecting to another processor may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(1);

/// How long a processor's resolved address is used before it is resolved
/// again (a processor that moves is reached again within this).
const RESOLVED_FOR: Duration = Duration::from_secs(10);

/// The process's agent: its pool is shared by every forwarded request.
static AGENT: LazyLock<ureq::Agent> = LazyLock::new(|| {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_idle_connections(4 * IDLE_PER_HOST)
        .max_idle_connections_per_host(IDLE_PER_HOST)
        // A processor whose host is gone does not refuse: it never answers.
        .timeout_connect(Some(CONNECT_WITHIN))
        .user_agent(concat!("feedlog/", env!("CARGO_PKG_VERSION")))
        .build();
    ureq::Agent::with_parts(config, DefaultConnector::default(), KeptResolver::default())
});

/// Resolves each processor's `host:port` once per [`RESOLVED_FOR`]. The
/// agent resolves before every request, pooled connection or not, and with
/// a timeout set its default resolver does so on a new thread: per request,
/// that thread cost more than the forwarded request itself.
#[derive(Debug, Default)]
struct KeptResolver {
    inner: DefaultResolver,
    kept: Mutex<HashMap<String, (Instant, ResolvedSocketAddrs)>>,
}

impl Resolver for KeptResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let key = uri.authority().map_or("", |a| a.as_str()).to_string();
        let kept = |k: &HashMap<_, (Instant, ResolvedSocketAddrs)>| {
            k.get(&key)
                .filter(|(at, _)| at.elapsed() < RESOLVED_FOR)
                .map(|(_, addrs)| addrs.clone())
        };
        if let Some(addrs) = kept(&self.kept.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(addrs);
        }
        let addrs = self.inner.resolve(uri, config, timeout)?;
        let mut k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        k.retain(|_, (at, _)| at.elapsed() < RESOLVED_FOR);
        k.insert(key, (Instant::now(), addrs.clone()));
        Ok(addrs)
    }
}

/// `GET base + path_and_query` with extra headers, within `timeout`.
pub fn get(
    base: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Response, ClientError> {
    request("GET", base, path_and_query, headers, timeout)
}

/// `method` (`GET`, `POST` with no body, or `DELETE`) at `base +
/// path_and_query` with extra headers, within `timeout`.
pub fn request(
    method: &str,
    base: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Response, ClientError> {
    base.strip_prefix("http://")
        .map(|h| h.trim_end_matches('/'))
        .filter(|h| !h.is_empty() && !h.contains('/'))
        .ok_or_else(|| ClientError::BadUrl(base.to_string()))?;
    let url = format!("{}{path_and_query}", base.trim_end_matches('/'));
    let failed = |reason: String| ClientError::Failed {
        url: url.clone(),
        reason,
    };
    let sent = match method {
        "POST" => {
            let mut req = AGENT
                .post(&url)
                .config()
                .timeout_global(Some(timeout))
                .build();
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            req.send_empty()
        }
        _ => {
            let mut req = match method {
                "DELETE" => AGENT.delete(&url),
                _ => AGENT.get(&url),
            }
            .config()
            .timeout_global(Some(timeout))
            .build();
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            req.call()
        }
    };
    let mut resp = sent.map_err(|e| failed(e.to_string()))?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (content_type, link) = (header("content-type"), header("link"));
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_vec()
        .map_err(|e| failed(e.to_string()))?;
    Ok(Response {
        status,
        content_type,
        link,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    /// A server on loopback that answers `answers` in turn, each to the
    /// next request on whatever connection it comes; returns its address
    /// and, once every answer is sent, how many connections it accepted.
    fn serve(answers: Vec<&'static [u8]>) -> (String, std::thread::JoinHandle<usize>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let h = std::thread::spawn(move || {
            let mut connections = 0;
            let mut answers = answers.into_iter().peekable();
            while answers.peek().is_some() {
                let (s, _) = l.accept().unwrap();
                connections += 1;
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                let mut line = String::new();
                // Each request head ends with an empty line; an answer
                // follows it. A closed connection waits for the next one.
                while answers.peek().is_some() && r.read_line(&mut line).unwrap() > 0 {
                    if line == "\r\n" {
                        w.write_all(answers.next().unwrap()).unwrap();
                    }
                    line.clear();
                }
            }
            connections
        });
        (base, h)
    }

    // Proves content-length and chunked bodies, statuses and headers come through, and that three requests to one processor share one connection.
    #[test]
    fn answers_parse_and_connections_are_reused() {
        let (base, server) = serve(vec![
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nlink: <x>; rel=\"next\"\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
        ]);
        let t = Duration::from_secs(5);
        let r = get(&base, "/a", &[("X-Feedlog-Forwarded", "1")], t).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        assert_eq!(r.link.as_deref(), Some("<x>; rel=\"next\""));
        let r = get(&base, "/b", &[], t).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (503, &b"abcde"[..]));
        let r = get(&base, "/c", &[], t).unwrap();
        assert_eq!((r.status, r.body.len()), (404, 0));
        assert_eq!(
            server.join().unwrap(),
            1,
            "one connection for three requests"
        );
        assert!(matches!(
            get("ftp://x", "/", &[], t),
            Err(ClientError::BadUrl(_))
        ));
    }

    // Proves a resolved address is kept for RESOLVED_FOR (a name that cannot resolve is answered from what was kept) and resolved again after.
    #[test]
    fn resolved_addresses_are_kept_then_resolved_again() {
        let r = KeptResolver::default();
        let uri: ureq::http::Uri = "http://processor.invalid:8080/v1/x".parse().unwrap();
        let config = ureq::Agent::config_builder().build();
        let addr: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let mut addrs = r.inner.empty();
        addrs.push(addr);
        let put = |at: Instant| {
            let mut k = r.kept.lock().unwrap();
            k.insert("processor.invalid:8080".to_string(), (at, addrs.clone()));
        };
        let resolve = || r.resolve(&uri, &config, NextTimeout::default());
        put(Instant::now());
        assert_eq!(&resolve().unwrap()[..], &[addr]);
        put(Instant::now() - RESOLVED_FOR - Duration::from_secs(1));
        assert!(resolve().is_err(), "an expired address is resolved again");
    }

    // Proves an answer that is not HTTP is an error naming the URL, not a hang or a panic.
    #[test]
    fn garbage_is_an_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            s.write_all(b"garbage\r\n\r\n").unwrap();
        });
        let e = get(&base, "/x", &[], Duration::from_secs(5)).unwrap_err();
        h.join().unwrap();
        assert!(e.to_string().contains("/x"), "{e}");
    }
}
