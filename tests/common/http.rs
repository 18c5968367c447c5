//! A minimal HTTP/1.1 client over `std::net` for the API tests: one request
//! per connection, `Content-Length` or chunked bodies, and a server-sent
//! events reader. Small enough to read; no client stack in the dev-deps.

use super::Views;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An answer.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Headers,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| {
            format!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// A client of one server.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    /// The server.
    pub addr: SocketAddr,
}

fn connect(addr: SocketAddr, method: &str, path: &str) -> TcpStream {
    connect_with(addr, method, path, &[])
}

/// A request with extra headers.
fn connect_with(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect to the API");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    s
}

/// Header names (lower-cased) and values.
type Headers = Vec<(String, String)>;

/// Splits a response head off `buf` once it is complete: status, headers,
/// and where the body starts.
fn head(buf: &[u8]) -> Option<(u16, Headers, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = String::from_utf8_lossy(&buf[..end]);
    let mut lines = text.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some((status, headers, end))
}

/// Decodes whole chunks from the front of `raw` into `out`; returns the
/// bytes consumed and whether the last chunk was seen.
fn dechunk(raw: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
    let mut at = 0;
    loop {
        let Some(nl) = raw[at..].windows(2).position(|w| w == b"\r\n") else {
            return (at, false);
        };
        let size_text = String::from_utf8_lossy(&raw[at..at + nl]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .expect("chunk size");
        let start = at + nl + 2;
        if size == 0 {
            return (start, true);
        }
        if raw.len() < start + size + 2 {
            return (at, false);
        }
        out.extend_from_slice(&raw[start..start + size]);
        at = start + size + 2;
    }
}

/// `method path` with a JSON body to the server at `addr`, read to the
/// end (for a WebDriver server, which takes JSON commands).
pub fn send_json(addr: SocketAddr, method: &str, path: &str, body: &Value) -> Response {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.to_string();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read up to the body's length: a WebDriver server may keep the
    // connection open.
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 8192]);
    loop {
        if let Some((status, headers, end)) = head(&buf) {
            let len = headers.iter().find(|(k, _)| k == "content-length");
            let len: usize = len
                .and_then(|(_, v)| v.parse().ok())
                .expect("a content-length");
            if buf.len() >= end + len {
                let body = buf[end..end + len].to_vec();
                return Response {
                    status,
                    headers,
                    body,
                };
            }
        }
        let n = s.read(&mut chunk).expect("read the response");
        assert!(n > 0, "the connection closed mid-response");
        buf.extend_from_slice(&chunk[..n]);
    }
}

impl Client {
    /// `GET path`.
    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path)
    }

    /// One request, read to the end.
    pub fn request(&self, method: &str, path: &str) -> Response {
        let mut s = connect(self.addr, method, path);
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).expect("read the response");
        let (status, headers, end) = head(&buf).expect("a response head");
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            let mut out = Vec::new();
            dechunk(&buf[end..], &mut out);
            out
        } else {
            buf[end..].to_vec()
        };
        Response {
            status,
            headers,
            body,
        }
    }

    /// `GET path` as JSON, which must answer 200.
    pub fn json(&self, path: &str) -> Result<Value, String> {
        let r = self.get(path);
        if r.status != 200 {
            return Err(format!(
                "GET {path}: status {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        r.json()
    }

    /// Opens a server-sent events stream.
    pub fn events(&self, path: &str) -> EventStream {
        self.events_with(path, &[])
    }

    /// Opens a server-sent events stream with extra request headers.
    pub fn events_with(&self, path: &str, headers: &[(&str, &str)]) -> EventStream {
        let mut s = connect_with(self.addr, "GET", path, headers);
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut raw = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let (status, headers, end) = loop {
            if let Some(h) = head(&raw) {
                break h;
            }
            assert!(Instant::now() < deadline, "no response head");
            let mut b = [0u8; 4096];
            match s.read(&mut b) {
                Ok(0) => panic!("closed before the head"),
                Ok(n) => raw.extend_from_slice(&b[..n]),
                Err(_) => {}
            }
        };
        raw.drain(..end);
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        EventStream {
            stream: s,
            status,
            headers,
            chunked,
            raw,
            text: Vec::new(),
            unread: false,
        }
    }
}

/// A server-sent events stream being read.
pub struct EventStream {
    stream: TcpStream,
    /// Status of the stream's response.
    pub status: u16,
    /// Its headers.
    pub headers: Headers,
    chunked: bool,
    raw: Vec<u8>,
    text: Vec<u8>,
    /// Whether [`EventStream::next`] returns `event: unread` (the unread
    /// count); else it passes over them, as a client that shows no badge.
    pub unread: bool,
}

/// One server-sent event (or comment, with `event` "comment").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sse {
    /// The `event:` field, "message" when absent, "comment" for a comment.
    pub event: String,
    /// The `data:` lines, joined with newlines.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

impl EventStream {
    /// The next event, or `None` when `timeout` passes first.
    pub fn next(&mut self, timeout: Duration) -> Option<Sse> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.chunked {
                let (used, _) = dechunk(&self.raw, &mut self.text);
                self.raw.drain(..used);
            } else {
                self.text.append(&mut self.raw);
            }
            if let Some(end) = self.text.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.text.drain(..end + 2).collect();
                let block = String::from_utf8_lossy(&block).into_owned();
                let mut ev = Sse {
                    event: "message".into(),
                    data: String::new(),
                    id: None,
                };
                for line in block.lines() {
                    if let Some(c) = line.strip_prefix(':') {
                        ev.event = "comment".into();
                        ev.data = c.trim().into();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        ev.id = Some(v.trim().into());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        ev.event = v.trim().into();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        if !ev.data.is_empty() {
                            ev.data.push('\n');
                        }
                        ev.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if ev.event == "unread" && !self.unread {
                    continue;
                }
                return Some(ev);
            }
            if Instant::now() >= deadline {
                return None;
            }
            let mut b = [0u8; 4096];
            match self.stream.read(&mut b) {
                Ok(0) => return None,
                Ok(n) => self.raw.extend_from_slice(&b[..n]),
                Err(_) => {}
            }
        }
    }
}

impl Views for Client {
    fn get(
        &self,
        view: &str,
        user: u64,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Value, String> {
        let mut path = match view {
            "counters" => return self.json(&format!("/v1/users/{user}/counters")),
            "recent_followers" => format!("/v1/users/{user}/followers/recent?limit={limit}"),
            "timeline" | "posts" | "followers" | "followees" | "mutes" | "blocks" => {
                format!("/v1/users/{user}/{view}?limit={limit}")
            }
            other if other.starts_with("likes/") || other.starts_with("replies/") => {
                let (list, p) = other.split_once('/').unwrap_or_default();
                // Replies carry user 1's flags.
                let viewer = if list == "replies" { "&viewer=1" } else { "" };
                let mut path = format!("/v1/posts/{user}/{p}/{list}?limit={limit}{viewer}");
                if let Some(c) = cursor {
                    path += &format!("&cursor={c}");
                }
                let r = self.get(&path);
                let body = r.json().map_err(|e| e.to_string())?;
                return match r.status {
                    200 => Ok(body),
                    404 => Ok(serde_json::json!({ "error": body["error"]["code"] })),
                    s => Err(format!("{path}: {s} {body}")),
                };
            }
            other if other.starts_with("timeline?") => {
                let query = view.trim_start_matches("timeline?");
                format!("/v1/users/{user}/timeline?limit={limit}&{query}")
            }
            // Catch-up: `after` the cursor, or the home marker.
            "catch-up" => {
                let after = cursor.unwrap_or("marker");
                return self.json(&format!(
                    "/v1/users/{user}/timeline?limit={limit}&after={after}"
                ));
            }
            "notifications-catch-up" => {
                let after = cursor.unwrap_or("marker");
                return self.json(&format!(
                    "/v1/users/{user}/notifications?limit={limit}&after={after}"
                ));
            }
            // `markers?reposts=M`: `limit` is the unread bound.
            other if other.starts_with("markers") => {
                let query = other.trim_start_matches("markers").trim_start_matches('?');
                return self.json(&format!("/v1/users/{user}/markers?max={limit}&{query}"));
            }
            // `notifications?grouped=G&types=T`.
            other if other.starts_with("notifications") => {
                let query = other
                    .trim_start_matches("notifications")
                    .trim_start_matches('?');
                format!("/v1/users/{user}/notifications?limit={limit}&{query}")
            }
            other => return Err(format!("no view {other}")),
        };
        if let Some(c) = cursor {
            path += &format!("&cursor={c}");
        }
        self.json(&path)
    }

    fn post(&self, author: u64, post_id: u64, viewer: Option<u64>) -> Result<Value, String> {
        let query = viewer.map_or(String::new(), |v| format!("?viewer={v}"));
        let r = self.get(&format!("/v1/posts/{author}/{post_id}{query}"));
        let body = r.json().map_err(|e| e.to_string())?;
        match r.status {
            200 => Ok(body),
            404 => Ok(serde_json::json!({ "error": body["error"]["code"] })),
            s => Err(format!("post ({author}, {post_id}): {s} {body}")),
        }
    }

    fn why(&self, user: u64, author: u64, post_id: u64) -> Result<Value, String> {
        self.json(&format!(
            "/v1/users/{user}/timeline/why?author={author}&post_id={post_id}"
        ))
    }
}

/// A two-worker runtime and a listener on an ephemeral loopback port, for
/// serving the API in a test.
pub fn ephemeral_listener() -> (tokio::runtime::Runtime, tokio::net::TcpListener, SocketAddr) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    (rt, listener, addr)
}

/// A `feedlog` child process, killed when dropped.
pub struct Proc(pub Child, pub String);

impl Proc {
    /// Starts `feedlog --data DIR ARGS`, waits for its "serving the read API
    /// on http://ADDR" line and returns the process and ADDR.
    pub fn serving(data: &Path, args: &[&str]) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_feedlog"))
            .arg("--data")
            .arg(data)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "exited before serving"
            );
            if let Some(rest) = line.trim().strip_prefix("serving the read API on http://") {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in err.lines() {});
        Proc(child, addr)
    }

    pub fn client(&self) -> Client {
        Client {
            addr: self.1.parse().unwrap(),
        }
    }

    /// SIGTERM, then the exit code.
    pub fn terminate(mut self) -> Option<i32> {
        unsafe_kill(self.0.id());
        let status = self.0.wait().unwrap();
        status.code()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn unsafe_kill(pid: u32) {
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
}

/// A client of the stream as docs/http-api.md describes one: its copy
/// starts as the `page`, an `entry` replaces its post's entry or joins, a
/// `delete` removes it, and it keeps its `limit` newest entries.
pub struct StreamCopy {
    pub limit: usize,
    pub items: Vec<serde_json::Value>,
}

impl StreamCopy {
    pub fn apply(&mut self, e: &Sse) {
        let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
        let post = |i: &serde_json::Value| (i["post_id"].as_u64(), i["author"].as_u64());
        match e.event.as_str() {
            "page" => self.items = data["items"].as_array().unwrap().clone(),
            "entry" => {
                self.items.retain(|i| post(i) != post(&data));
                self.items.push(data);
            }
            "delete" => self.items.retain(|i| post(i) != post(&data)),
            other => panic!("unexpected event {other}: {data}"),
        }
        let key = |i: &serde_json::Value| {
            let n = |f: &str| std::cmp::Reverse(i[f].as_u64().unwrap());
            (n("ts"), n("post_id"), n("author"))
        };
        self.items.sort_by_key(key);
        self.items.truncate(self.limit);
    }
}
