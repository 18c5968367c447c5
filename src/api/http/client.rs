//! A minimal blocking HTTP/1.1 client for processor-to-processor reads in
//! Kafka mode (forwarded requests, remote outboxes): one `GET` per
//! connection, a body delimited by `Content-Length`, chunks or the close.
//! It runs on the API's blocking pool, like the RocksDB reads it stands in
//! for.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

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
    /// Connecting, sending or reading failed.
    #[error("{url}: {source}")]
    Io {
        /// Where.
        url: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The answer is not HTTP.
    #[error("{url}: malformed response: {reason}")]
    Malformed {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
}

/// `GET base + path_and_query` with extra headers, within `timeout`.
pub fn get(
    base: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Response, ClientError> {
    let hostport = base
        .strip_prefix("http://")
        .map(|h| h.trim_end_matches('/'))
        .filter(|h| !h.is_empty() && !h.contains('/'))
        .ok_or_else(|| ClientError::BadUrl(base.to_string()))?;
    let url = format!("{base}{path_and_query}");
    let io = |source| ClientError::Io {
        url: url.clone(),
        source,
    };
    let addr = hostport
        .to_socket_addrs()
        .map_err(io)?
        .next()
        .ok_or_else(|| ClientError::BadUrl(base.to_string()))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
    s.set_read_timeout(Some(timeout)).map_err(io)?;
    s.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut req =
        format!("GET {path_and_query} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes()).map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(io)?;
    parse(&raw).map_err(|reason| ClientError::Malformed { url, reason })
}

fn parse(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or("no status line")?;
    let mut content_type = None;
    let mut link = None;
    let mut chunked = false;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-type" => content_type = Some(v.trim().to_string()),
                "link" => link = Some(v.trim().to_string()),
                "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
                _ => {}
            }
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        content_type,
        link,
        body,
    })
}

fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let nl = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk")?;
        let size_text = std::str::from_utf8(&raw[..nl]).map_err(|_| "bad chunk size")?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "bad chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        let start = nl + 2;
        let chunk = raw.get(start..start + size).ok_or("truncated chunk")?;
        out.extend_from_slice(chunk);
        raw = raw.get(start + size + 2..).ok_or("truncated chunk")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves content-length and chunked bodies parse, and garbage is refused.
    #[test]
    fn parses_plain_and_chunked_bodies() {
        let plain =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        let r = parse(plain).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        let chunked = b"HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let r = parse(chunked).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (503, &b"abcde"[..]));
        assert!(parse(b"garbage").is_err());
        assert!(get("ftp://x", "/", &[], Duration::from_secs(1)).is_err());
    }
}
