//! The Redis wire protocol (RESP), as much as `feedlog-bench redis` needs:
//! commands encoded into a buffer, and the replies it reads back.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;

pub(super) fn number(bytes: &[u8]) -> Result<u64> {
    let text = std::str::from_utf8(bytes)?;
    text.parse()
        .with_context(|| format!("not a number from redis: {text:?}"))
}

/// One RESP connection: commands queued into a buffer, replies read in
/// order.
pub(super) struct Conn {
    reader: BufReader<TcpStream>,
    pub(super) writer: std::io::BufWriter<TcpStream>,
    pub(super) line: Vec<u8>,
}

impl Conn {
    pub(super) fn connect(port: u16) -> Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::with_capacity(1 << 16, stream.try_clone()?),
            writer: std::io::BufWriter::with_capacity(1 << 16, stream),
            line: Vec::new(),
        })
    }

    pub(super) fn queue(&mut self, args: &[&[u8]]) {
        let mut r = Resp::default();
        r.command(args.len());
        for a in args {
            r.bytes(a);
        }
        // A BufWriter's write only fails on a failed flush, which `flush`
        // reports again.
        let _ = self.writer.write_all(&r.buf);
    }

    pub(super) fn flush(&mut self) -> Result<()> {
        self.writer.flush().context("writing to redis")
    }

    pub(super) fn send(&mut self, args: &[&[u8]]) -> Result<()> {
        self.queue(args);
        self.flush()
    }

    /// Sends one command and reads its one-line reply.
    pub(super) fn integer_or_status(&mut self, args: &[&[u8]]) -> Result<()> {
        self.send(args)?;
        self.reply_line()
    }

    /// Reads one line into `self.line` (empty at end of stream); an error
    /// reply is an error.
    pub(super) fn reply_line(&mut self) -> Result<()> {
        self.line.clear();
        self.reader.read_until(b'\n', &mut self.line)?;
        match self.line.first() {
            None => bail!("redis closed the connection"),
            Some(b'-') => bail!("redis: {}", String::from_utf8_lossy(&self.line).trim_end()),
            Some(_) => Ok(()),
        }
    }

    /// The length in a `*N` or `$N` header line.
    pub(super) fn header(&mut self, kind: u8) -> Result<i64> {
        self.reply_line()?;
        let line = String::from_utf8_lossy(&self.line).trim_end().to_string();
        match line.strip_prefix(kind as char) {
            Some(n) => n
                .parse()
                .with_context(|| format!("a bad redis reply: {line:?}")),
            None => bail!(
                "expected a '{}' reply from redis, got {line:?}",
                kind as char
            ),
        }
    }

    pub(super) fn bulk(&mut self) -> Result<Vec<u8>> {
        let len = self.header(b'$')?;
        let mut value = vec![0; usize::try_from(len).unwrap_or(0) + 2];
        std::io::Read::read_exact(&mut self.reader, &mut value)?;
        value.truncate(value.len() - 2);
        Ok(value)
    }

    pub(super) fn array(&mut self) -> Result<Vec<Vec<u8>>> {
        let n = self.header(b'*')?;
        (0..n).map(|_| self.bulk()).collect()
    }
}

/// RESP-encoded commands.
#[derive(Default)]
pub(super) struct Resp {
    pub(super) buf: Vec<u8>,
    pub(super) commands: u64,
}

impl Resp {
    pub(super) fn command(&mut self, args: usize) {
        self.commands += 1;
        let _ = write!(self.buf, "*{args}\r\n");
    }

    pub(super) fn bytes(&mut self, a: &[u8]) {
        let _ = write!(self.buf, "${}\r\n", a.len());
        self.buf.extend_from_slice(a);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `{prefix}:{id}`, the id zero-padded to 12 digits as
    /// redis-benchmark's `__rand_int__` writes it.
    pub(super) fn key(&mut self, prefix: char, id: u64) {
        self.bytes(format!("{prefix}:{id:012}").as_bytes());
    }

    pub(super) fn number(&mut self, n: u64) {
        self.bytes(n.to_string().as_bytes());
    }

    /// `ZREMRANGEBYRANK i:{user:012} 0 -(cap+1)`: keeps the newest `cap`.
    pub(super) fn trim(&mut self, user: u64, cap: u64) {
        self.command(4);
        self.bytes(b"ZREMRANGEBYRANK");
        self.key('i', user);
        self.bytes(b"0");
        self.bytes(format!("-{}", cap + 1).as_bytes());
    }

    /// `ZREM key member…`, at most 1,000 members per command.
    pub(super) fn zrem(&mut self, prefix: char, id: u64, members: &[u64]) {
        for chunk in members.chunks(1000) {
            self.command(2 + chunk.len());
            self.bytes(b"ZREM");
            self.key(prefix, id);
            for m in chunk {
                self.number(*m);
            }
        }
    }
}
