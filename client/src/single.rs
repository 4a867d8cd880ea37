//! The connection to a single server: a socket written with packed commands and read with
//! [`ReplyReader`] (a load reads a thousand answers per command, which the `redis` crate's
//! general parser made a third of bfctl's CPU). The `redis` crate still parses the URL; the
//! handshake is the one it sends (HELLO 3 or AUTH, then SELECT).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use redis::{Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, RedisResult, Value};

use crate::resp::{Reply, ReplyReader};
use crate::transport::Commands;

/// Longest a connection may take to open.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a single reply may take (a BF.LOADCHUNK of a big chunk, a WAIT).
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connection to one server.
pub struct SingleConnection {
    socket: Socket,
    reader: ReplyReader,
    /// The packed commands of the last pipeline, kept for its capacity.
    packed: Vec<u8>,
    /// Set once a write or a read failed midway: the replies are then out of step with the
    /// commands, and every later call fails until the caller reconnects.
    broken: bool,
}

impl SingleConnection {
    /// Connects to `info`'s server (within `connect_timeout`), authenticates and selects its
    /// database; every later read waits at most `response_timeout`.
    pub(crate) fn open(
        info: &ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<SingleConnection> {
        let socket = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                Socket::Tcp(tcp_connect(host, *port, connect_timeout)?)
            }
            ConnectionAddr::Unix(path) => Socket::Unix(UnixStream::connect(path)?),
            _ => {
                return Err(RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "TLS is not supported",
                )))
            }
        };
        match &socket {
            Socket::Tcp(s) => s.set_read_timeout(Some(response_timeout))?,
            Socket::Unix(s) => s.set_read_timeout(Some(response_timeout))?,
        }
        let mut conn = SingleConnection {
            socket,
            reader: ReplyReader::default(),
            packed: Vec::new(),
            broken: false,
        };
        for cmd in handshake(info) {
            if let Value::ServerError(e) = conn.request(&cmd)? {
                return Err(e.into());
            }
        }
        Ok(conn)
    }

    /// Sends bytes holding whole packed commands.
    pub fn send_packed(&mut self, packed: &[u8]) -> RedisResult<()> {
        self.usable()?;
        self.socket.write_all(packed).map_err(|e| self.failed(e))
    }

    /// The next reply (an error reply is `Value::ServerError`); push messages are skipped.
    pub fn recv(&mut self) -> RedisResult<Value> {
        self.recv_with(ReplyReader::read_reply, |v| matches!(v, Value::Push { .. }))
    }

    /// The next reply to adds or lookups, its answers read without a value each.
    pub(crate) fn recv_answers(&mut self) -> RedisResult<Reply> {
        self.recv_with(ReplyReader::read_answers, |r| {
            matches!(r, Reply::Value(Value::Push { .. }))
        })
    }

    fn recv_with<T>(
        &mut self,
        read: fn(&mut ReplyReader, &mut Socket) -> RedisResult<T>,
        is_push: fn(&T) -> bool,
    ) -> RedisResult<T> {
        self.usable()?;
        loop {
            match read(&mut self.reader, &mut self.socket) {
                Ok(v) if is_push(&v) => {}
                Ok(v) => return Ok(v),
                Err(e) => {
                    self.broken = true;
                    return Err(e);
                }
            }
        }
    }

    /// One command and its reply.
    pub(crate) fn request(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        self.pipeline(std::slice::from_ref(cmd))?
            .pop()
            .ok_or_else(|| RedisError::from((ErrorKind::Parse, "no reply")))
    }

    /// `cmds` written at once, then their replies in order.
    pub(crate) fn pipeline(&mut self, cmds: &[Cmd]) -> RedisResult<Vec<Value>> {
        self.send_commands(cmds, 0..cmds.len(), SingleConnection::recv)
    }

    /// Commands `which` of `cmds`, packed into the connection's buffer and written at once,
    /// then their replies in order, each read by `recv`.
    pub(crate) fn send_commands<C: Commands + ?Sized, T>(
        &mut self,
        cmds: &C,
        which: impl IntoIterator<Item = usize>,
        recv: fn(&mut Self) -> RedisResult<T>,
    ) -> RedisResult<Vec<T>> {
        let mut packed = std::mem::take(&mut self.packed);
        packed.clear();
        let mut count = 0;
        for i in which {
            cmds.pack(i, &mut packed);
            count += 1;
        }
        let sent = self.send_packed(&packed);
        self.packed = packed;
        sent?;
        (0..count).map(|_| recv(self)).collect()
    }

    fn usable(&self) -> RedisResult<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection failed earlier and was not reopened",
            )
            .into());
        }
        Ok(())
    }

    fn failed(&mut self, e: io::Error) -> RedisError {
        self.broken = true;
        e.into()
    }
}

/// Connects to the first address of `host` that answers.
fn tcp_connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The commands that set a connection up as `info` asks: RESP3 (with its credentials) or the
/// credentials alone, then the database.
fn handshake(info: &ConnectionInfo) -> Vec<Cmd> {
    let settings = info.redis_settings();
    let mut cmds = Vec::new();
    if settings.protocol().supports_resp3() {
        let mut hello = redis::cmd("HELLO");
        hello.arg(3);
        if let Some(password) = settings.password() {
            hello
                .arg("AUTH")
                .arg(settings.username().unwrap_or("default"))
                .arg(password);
        }
        cmds.push(hello);
    } else if let Some(password) = settings.password() {
        let mut auth = redis::cmd("AUTH");
        if let Some(user) = settings.username() {
            auth.arg(user);
        }
        auth.arg(password);
        cmds.push(auth);
    }
    if settings.db() != 0 {
        let mut select = redis::cmd("SELECT");
        select.arg(settings.db());
        cmds.push(select);
    }
    cmds
}
