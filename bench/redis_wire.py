"""The few bytes of RESP the benches speak to a server (bench/instructions.py, bench/defrag.py):
no client library, so what a bench times or counts is the server's work and not a client's."""
import socket


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind = line[:1]
        if kind == b"*":
            return [self._reply() for _ in range(int(line[1:]))]
        if kind == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(1 << 20)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"-":
            raise RuntimeError(line.decode())
        return line[1:]

    def pipeline(self, commands):
        """Sends commands (bytes each), in chunks, and reads every reply."""
        pending = 0
        for i in range(0, len(commands), 500):
            chunk = commands[i:i + 500]
            self.s.sendall(b"".join(chunk))
            pending += len(chunk)
            while pending > 200:
                self._reply()
                pending -= 1
        last = None
        for _ in range(pending):
            last = self._reply()
        return last

    def call(self, *args):
        return self.pipeline([resp(*args)])

    def info(self, section):
        """INFO `section` as a dict of its fields."""
        text = self.call("INFO", section).decode()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l and not l.startswith("#"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
