//! The web page (`/ui`) in a real browser: headless Chromium driven over
//! WebDriver (`chromedriver`). Needs the Debian packages `chromium` and
//! `chromium-driver`; `./test.sh` runs it when they are installed and names
//! it as left out otherwise.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::api::{append_and_process, processed, Server};
use common::http::send_json;
use common::oracle_of;
use feedlog::api::http::ApiConfig;
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A chromedriver on a free loopback port, stopped on drop.
struct Driver(Child, SocketAddr);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One browser session.
struct Browser {
    driver: Driver,
    session: String,
}

impl Browser {
    fn start() -> Browser {
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let child = Command::new("chromedriver")
            .arg(format!("--port={}", addr.port()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian: chromium-driver)");
        let driver = Driver(child, addr);
        let start = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {"args": args}}}});
        let r = send_json(addr, "POST", "/session", &caps);
        let v = r.json().unwrap();
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"));
        Browser {
            session: session.to_string(),
            driver,
        }
    }

    fn command(&self, path: &str, body: Value) -> Value {
        let path = format!("/session/{}/{path}", self.session);
        let r = send_json(self.driver.1, "POST", &path, &body);
        let v = r.json().unwrap();
        assert_eq!(r.status, 200, "{path}: {v}");
        v["value"].clone()
    }

    fn open(&self, url: &str) {
        self.command("url", json!({ "url": url }));
    }

    /// Runs `script` in the page; its return value.
    fn run(&self, script: &str) -> Value {
        self.command("execute/sync", json!({"script": script, "args": []}))
    }

    /// Waits (up to 20 s) until `script` returns `want`.
    fn wait_for(&self, what: &str, script: &str, want: &Value) {
        let start = Instant::now();
        loop {
            let got = self.run(script);
            if &got == want {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{what}: {got}, want {want}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let path = format!("/session/{}", self.session);
        let _ = send_json(self.driver.1, "DELETE", &path, &json!({}));
    }
}

/// The keys (`author:post`) of user 1's first timeline page, as the page
/// lists them.
fn first_page_keys(oracle: &common::oracle::Oracle) -> Vec<Value> {
    oracle
        .timeline(1)
        .iter()
        .take(20)
        .map(|(p, a, _)| json!(format!("{a}:{p}")))
        .collect()
}

const SHOWN: &str =
    "return Array.from(document.querySelectorAll('#entries li')).map(li => li.dataset.key)";

// Proves the page, in headless Chromium, shows the oracle's first timeline page of a user, adds an entry produced afterwards (over the stream) with the unread count it brings and a like of it as its counts, explains a clicked entry, answers why a post is not there, shows the oracle's page as of an earlier time, and its time slider moves to an earlier time and back to live.
#[test]
#[ignore = "needs chromium and chromedriver (Debian: chromium, chromium-driver)"]
fn ui_shows_the_timeline_live_and_explains_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut lines = vec![
        r#"{"type":"follow","follower":1,"followee":2,"ts":1000}"#.to_string(),
        r#"{"type":"follow","follower":1,"followee":3,"ts":1001}"#.to_string(),
    ];
    for i in 0..30u64 {
        let (author, ts) = (2 + i % 3, 2000 + i);
        lines.push(format!(
            r#"{{"type":"post","author":{author},"post_id":{},"ts":{ts}}}"#,
            100 + i
        ));
    }
    let log = lines.join("\n");
    let (oracle, _) = oracle_of(&log);
    let processor = processed(tmp.path(), &log, 2);
    let server = Server::start(&processor, ApiConfig::default());
    let browser = Browser::start();
    browser.open(&format!("http://{}/ui?user=1", server.client.addr));
    let first = first_page_keys(&oracle);
    browser.wait_for("the first page", SHOWN, &Value::from(first.clone()));
    // Wait until the stream is open, then produce a new post of a followee.
    browser.wait_for(
        "the stream",
        "return document.getElementById('status').textContent",
        &json!("live"),
    );
    append_and_process(
        tmp.path(),
        &processor,
        &[r#"{"type":"post","author":3,"post_id":500,"ts":9000}"#],
    );
    let mut with_new = vec![json!("3:500")];
    with_new.extend(first);
    browser.wait_for("the new entry, live", SHOWN, &Value::from(with_new));
    // The stream's unread count (no marker: every entry — the 20 posts of
    // the followees 2 and 3, and the new one).
    browser.wait_for(
        "the unread count",
        "return document.getElementById('unread').textContent",
        &json!("21 unread"),
    );
    // A like of it comes over the stream as the entry's counts.
    append_and_process(
        tmp.path(),
        &processor,
        &[r#"{"type":"like","user":2,"author":3,"post_id":500,"ts":9001}"#],
    );
    browser.wait_for(
        "the entry's like",
        "return document.querySelector('#entries li .meta').textContent.endsWith(' · 1 like, 0 replies, 0 reposts')",
        &json!(true),
    );
    // Its why: posted by user 3, followed by user 1.
    browser.run("document.querySelector('#entries li').click()");
    let why = "const t = document.getElementById('why').textContent; return t.includes('in the timeline') && t.includes('user 3 posted it')";
    browser.wait_for("the entry's why", why, &json!(true));
    // Why not: user 4's post, user 1 does not follow them.
    append_and_process(
        tmp.path(),
        &processor,
        &[r#"{"type":"post","author":4,"post_id":600,"ts":9001}"#],
    );
    browser.run("document.getElementById('wn-post').value = '600'; document.getElementById('wn-author').value = '4'; document.querySelector('#whynot button').click()");
    let why_not = "return document.getElementById('why').textContent.includes('not in the timeline: not_following')";
    browser.wait_for("why a post is not there", why_not, &json!(true));
    // As of log time 2014: the events up to it are the first 17 lines.
    let (then, _) = oracle_of(&lines[..17].join("\n"));
    let want = first_page_keys(&then);
    assert!(!want.is_empty());
    browser.open(&format!(
        "http://{}/ui?user=1&as_of=2014",
        server.client.addr
    ));
    browser.wait_for("the page as of 2014", SHOWN, &Value::from(want));
    // The slider: an hour before the newest entry is before every event
    // (nothing), and back to 0 is the live page again.
    let status = "return document.getElementById('status').textContent";
    browser.wait_for(
        "the slider",
        "return document.getElementById('asof').disabled",
        &json!(false),
    );
    let slide = |h: i32| {
        browser.run(&format!(
            "const r = document.getElementById('asof'); r.value = '{h}'; r.dispatchEvent(new Event('change'))"
        ));
    };
    slide(-1);
    browser.wait_for(
        "an hour back",
        status,
        &json!("as of 1970-01-01T00:00:00.000Z"),
    );
    browser.wait_for("nothing then", SHOWN, &json!([]));
    slide(0);
    browser.wait_for("live again", status, &json!("live"));
    assert_eq!(browser.run(SHOWN)[0], json!("3:500"));
}
