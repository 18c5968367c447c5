//! The HTTP server loop: bounded connections, bounded request heads, and a
//! JSON error for every rejection.
//!
//! axum's own `serve` has no header-read timeout and no connection limit,
//! and hyper answers an oversize or malformed request head with an empty
//! body. Here each connection is served by hyper's HTTP/1 connection with
//! a header-read timeout (which also closes idle keep-alive connections),
//! behind a [`HeadGuard`]: it watches the bytes of every request head as
//! they arrive and, before hyper sees a head that is too long (URL or
//! headers), malformed, or announces a body the API does not take, answers
//! `{"error":{"code","message"}}` itself and closes. A connection over the
//! limit is answered 503 the same way.

use super::Limits;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;

/// A complete HTTP/1.1 error answer with the API's JSON error body; the
/// connection closes after it.
pub fn error_response(status: u16, reason: &str, code: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Where the guard is in the byte stream of a connection.
enum Phase {
    /// Reading a request head (its bytes so far, held back from hyper).
    Head(Vec<u8>),
    /// Passing `n` more bytes of a request body.
    Body(u64),
    /// Answering with this error, then closing: `(bytes, written)`.
    Rejecting(Vec<u8>, usize),
    /// The error is written and the write side shut: reading and dropping
    /// what the client still sends (at most this many more bytes), so that
    /// closing with unread data does not reset the connection before the
    /// client has read the answer. hyper's header timeout bounds the wait.
    Draining(u64),
    /// The connection reads as closed.
    Closed,
}

/// Where a request head that has reached `head` ends (the byte after its
/// empty line), looking for line ends from `from` on. Lines end in CRLF or,
/// as HTTP/1.1 lets a server accept, a bare LF (the parser takes both).
fn head_end(head: &[u8], from: usize) -> Option<usize> {
    (from..head.len()).find_map(|i| match &head[i..] {
        [b'\n', b'\n', ..] => Some(i + 2),
        [b'\n', b'\r', b'\n', ..] => Some(i + 3),
        _ => None,
    })
}

/// Bytes of a request line besides its target (method, version, spaces).
const REQUEST_LINE_EXTRA: usize = 32;

/// Bytes a rejected client may still send before the connection closes.
const DRAIN_BYTES: u64 = 4 << 20;

/// An I/O wrapper that checks every request head on the wire (see the
/// module docs). hyper sees a head only once it is complete and checked;
/// bodies pass as they come. What hyper writes passes through, except
/// while the guard answers an error itself.
pub struct HeadGuard<S> {
    inner: S,
    limits: Limits,
    phase: Phase,
    /// Checked bytes not yet handed to hyper, from `given` on.
    ready: Vec<u8>,
    given: usize,
}

impl<S> HeadGuard<S> {
    /// Guards `inner` with `limits`.
    pub fn new(inner: S, limits: Limits) -> HeadGuard<S> {
        HeadGuard {
            inner,
            limits,
            phase: Phase::Head(Vec::new()),
            ready: Vec::new(),
            given: 0,
        }
    }

    /// Takes bytes the client sent: checked ones move to `ready`; a bad
    /// head starts the rejection (what follows it is never looked at).
    fn observe(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.phase {
                Phase::Body(n) => {
                    let take = (*n).min(bytes.len() as u64) as usize;
                    *n -= take as u64;
                    self.ready.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if *n == 0 {
                        self.phase = Phase::Head(Vec::new());
                    }
                }
                Phase::Head(head) => {
                    let start = head.len();
                    let room = self.limits.max_head_bytes + 1 - start;
                    let take = bytes.len().min(room);
                    head.extend_from_slice(&bytes[..take]);
                    let end = head_end(head, start.saturating_sub(2));
                    match end {
                        Some(end) => {
                            bytes = &bytes[end - start..];
                            head.truncate(end);
                            match self.check_head() {
                                Ok(head) => self.ready.extend_from_slice(&head),
                                Err(answer) => return self.reject(answer),
                            }
                        }
                        None if head.len() > self.limits.max_head_bytes
                            || (head.len() > self.limits.max_url_bytes + REQUEST_LINE_EXTRA
                                && !head.contains(&b'\n')) =>
                        {
                            let answer = self.too_long();
                            return self.reject(answer);
                        }
                        None => bytes = &bytes[take..],
                    }
                }
                Phase::Rejecting(..) | Phase::Draining(_) | Phase::Closed => return,
            }
        }
    }

    fn reject(&mut self, answer: Vec<u8>) {
        self.phase = Phase::Rejecting(answer, 0);
    }

    /// The answer to a head that grew past the limit before it ended.
    fn too_long(&self) -> Vec<u8> {
        let in_request_line = match &self.phase {
            Phase::Head(head) => !head.contains(&b'\n'),
            _ => false,
        };
        if in_request_line {
            error_response(
                414,
                "URI Too Long",
                "uri_too_long",
                &format!(
                    "the URL is longer than {} bytes, the most accepted",
                    self.limits.max_url_bytes
                ),
            )
        } else {
            error_response(
                431,
                "Request Header Fields Too Large",
                "headers_too_large",
                &format!(
                    "the request head is longer than {} bytes",
                    self.limits.max_head_bytes
                ),
            )
        }
    }

    /// Checks the complete head held in the phase; on success returns it
    /// and moves to its body, if any.
    fn check_head(&mut self) -> Result<Vec<u8>, Vec<u8>> {
        let Phase::Head(head) = std::mem::replace(&mut self.phase, Phase::Head(Vec::new())) else {
            return Ok(Vec::new());
        };
        let mut headers = [httparse::EMPTY_HEADER; 100];
        let mut req = httparse::Request::new(&mut headers);
        let bad = |message: String| error_response(400, "Bad Request", "bad_request", &message);
        match req.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err(bad("incomplete request head".into())),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(error_response(
                    431,
                    "Request Header Fields Too Large",
                    "headers_too_large",
                    "more than 100 header fields",
                ))
            }
            Err(e) => return Err(bad(format!("malformed HTTP request: {e}"))),
        }
        let target = req.path.unwrap_or("");
        if target.len() > self.limits.max_url_bytes {
            return Err(error_response(
                414,
                "URI Too Long",
                "uri_too_long",
                &format!(
                    "the URL is {} bytes; at most {} are accepted",
                    target.len(),
                    self.limits.max_url_bytes
                ),
            ));
        }
        let mut body = 0u64;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(error_response(
                    411,
                    "Length Required",
                    "body_not_accepted",
                    "this API is read-only: a request body needs a Content-Length (and is ignored)",
                ));
            }
            if h.name.eq_ignore_ascii_case("content-length") {
                body = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| bad("Content-Length is not a number".into()))?;
            }
        }
        if body > self.limits.max_body_bytes {
            return Err(error_response(
                413,
                "Payload Too Large",
                "body_too_large",
                &format!(
                    "a request body of {body} bytes; at most {} are accepted (this API is read-only)",
                    self.limits.max_body_bytes
                ),
            ));
        }
        if body > 0 {
            self.phase = Phase::Body(body);
        }
        Ok(head)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for HeadGuard<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.given < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.given);
                buf.put_slice(&this.ready[this.given..this.given + n]);
                this.given += n;
                if this.given == this.ready.len() {
                    this.ready.clear();
                    this.given = 0;
                }
                return Poll::Ready(Ok(()));
            }
            match &mut this.phase {
                Phase::Rejecting(answer, written) => {
                    while *written < answer.len() {
                        let n =
                            ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]))?;
                        if n == 0 {
                            break;
                        }
                        *written += n;
                    }
                    ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
                    // Best effort: the client has its answer.
                    let _ = Pin::new(&mut this.inner).poll_shutdown(cx);
                    this.phase = Phase::Draining(DRAIN_BYTES);
                    continue;
                }
                Phase::Draining(left) => {
                    let mut chunk = [0u8; 8192];
                    let mut read = ReadBuf::new(&mut chunk);
                    match ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read)) {
                        Ok(()) if !read.filled().is_empty() => {
                            *left = left.saturating_sub(read.filled().len() as u64);
                            if *left == 0 {
                                this.phase = Phase::Closed;
                            }
                        }
                        // The client closed (or reset): done.
                        _ => this.phase = Phase::Closed,
                    }
                    continue;
                }
                Phase::Closed => return Poll::Ready(Ok(())),
                Phase::Head(_) | Phase::Body(_) => {}
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // The client closed (a partial head is simply dropped).
                return Poll::Ready(Ok(()));
            }
            let got = read.filled().to_vec();
            this.observe(&got);
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadGuard<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match this.phase {
            // The guard's own answer goes out alone.
            Phase::Rejecting(..) | Phase::Draining(_) | Phase::Closed => {
                Poll::Ready(Ok(data.len()))
            }
            _ => Pin::new(&mut this.inner).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Serves `app` on `listener` until `shutdown` completes: at most
/// `limits.max_connections` connections at a time, each an HTTP/1.1
/// connection behind a [`HeadGuard`] with `limits.header_timeout`. On
/// shutdown it stops accepting and gives open connections (timeline
/// streams never end by themselves) `grace` to finish.
pub async fn serve_connections(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> io::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before
                    // it was accepted: keep serving the others.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tokio::spawn(refuse(stream, limits.max_connections));
            continue;
        };
        let service =
            hyper_util::service::TowerToHyperService::new(tower::ServiceExt::map_request(
                app.clone(),
                |req: hyper::Request<hyper::body::Incoming>| req.map(axum::body::Body::new),
            ));
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(TokioIo::new(HeadGuard::new(stream, limits)), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // A client that vanished mid-request is not the server's error.
            let _ = conn.await;
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {}
    }
    Ok(())
}

/// Answers a connection over the limit with a JSON 503 and closes it.
///
/// The close lingers: after the answer and a FIN, whatever the client sent
/// is read and discarded (for at most two seconds) before the socket is
/// dropped. Closing with unread bytes in the receive buffer makes the kernel
/// send a reset, and a reset can make the client lose the 503 it had not yet
/// read.
async fn refuse(mut stream: tokio::net::TcpStream, max: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answer = error_response(
        503,
        "Service Unavailable",
        "too_many_connections",
        &format!("the server holds its maximum of {max} connections; retry shortly"),
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let _ = stream.write_all(&answer).await;
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 1024];
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_url_bytes: 64,
            max_head_bytes: 256,
            max_body_bytes: 16,
            ..Limits::default()
        }
    }

    /// Feeds `input` in chunks of `chunk`; returns the bytes handed on and
    /// the rejection, if any.
    fn feed(input: &[u8], chunk: usize) -> (usize, Option<String>) {
        let mut g = HeadGuard::new((), limits());
        for c in input.chunks(chunk) {
            g.observe(c);
        }
        let answer = match &g.phase {
            Phase::Rejecting(a, _) => Some(String::from_utf8_lossy(a).into_owned()),
            _ => None,
        };
        (g.ready.len(), answer)
    }

    // Proves good requests (pipelined, with small bodies) pass whole, whatever the read sizes.
    #[test]
    fn good_requests_pass() {
        let two = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /c HTTP/1.1\r\n\r\n";
        for chunk in [1, 2, 7, 1000] {
            assert_eq!(feed(two, chunk), (two.len(), None), "chunk {chunk}");
        }
    }

    // Regression: a head with bare LF line ends was held until the header timeout, then closed unanswered. It passes like a CRLF head, whatever the read sizes.
    #[test]
    fn bare_lf_heads_pass() {
        let two = b"GET /a HTTP/1.1\nHost: x\n\nGET /b HTTP/1.1\r\nHost: x\n\r\n";
        for chunk in [1, 2, 3, 1000] {
            assert_eq!(feed(two, chunk), (two.len(), None), "chunk {chunk}");
        }
    }

    // Proves every kind of bad head gets its JSON error, and nothing of it reaches hyper.
    #[test]
    fn bad_heads_get_json_errors() {
        let long_url = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(100));
        let endless_line = format!("GET /{}", "a".repeat(1000));
        let big_headers = format!("GET / HTTP/1.1\r\n{}\r\n", "X-A: b\r\n".repeat(60));
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (long_url.into_bytes(), "414"),
            (endless_line.into_bytes(), "414"),
            (big_headers.into_bytes(), "431"),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 99\r\n\r\n".to_vec(),
                "413",
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
                "411",
            ),
            (b"\x00\x01garbage\r\n\r\n".to_vec(), "400"),
        ];
        for (input, status) in cases {
            for chunk in [1, 5, 4096] {
                let (passed, answer) = feed(&input, chunk);
                let answer = answer.unwrap_or_else(|| panic!("{status} not rejected"));
                assert!(
                    answer.starts_with(&format!("HTTP/1.1 {status} ")),
                    "{answer}"
                );
                assert!(
                    answer.contains("\r\ncontent-type: application/json\r\n"),
                    "{answer}"
                );
                let body = answer.split("\r\n\r\n").nth(1).unwrap();
                let v: serde_json::Value = serde_json::from_str(body).unwrap();
                assert!(v["error"]["code"].is_string() && v["error"]["message"].is_string());
                assert_eq!(passed, 0, "{status}: the bad head reached hyper");
            }
        }
        // A good request before a bad one still passes.
        let mixed = format!(
            "GET /ok HTTP/1.1\r\n\r\nGET /{} HTTP/1.1\r\n\r\n",
            "b".repeat(100)
        );
        let (passed, answer) = feed(mixed.as_bytes(), 4096);
        assert_eq!(passed, "GET /ok HTTP/1.1\r\n\r\n".len());
        assert!(answer.unwrap().starts_with("HTTP/1.1 414"));
    }
}
