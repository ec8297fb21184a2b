//! Minimal HTTP/1.1 client pieces for the `http` mode: the target URL, the request bytes, and
//! a response reader (status line and headers by `httparse`; body by Content-Length,
//! chunked transfer coding, or until the server closes). TLS is [`crate::tls`]'s; no
//! redirects.

use std::io::{self, Read};
use std::str::FromStr;

use serde::Serialize;

/// `http://host[:port][/path]` or `https://host[:port][/path]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Url {
    /// `https://`: the requests go over TLS (default port 443 instead of 80).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl FromStr for Url {
    type Err = String;

    fn from_str(s: &str) -> Result<Url, String> {
        // The scheme is case-insensitive (RFC 3986 section 3.1).
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("'{s}' is not an http:// or https:// URL"))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => {
                return Err(format!(
                    "'{s}': {scheme}:// is not supported; probe speaks http:// and https://, \
                     or raw TCP to HOST:PORT"
                ))
            }
        };
        let default_port = if tls { 443 } else { 80 };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(format!("'{s}' has no host"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("'{s}': unterminated [ in host"))?;
            if h.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(format!("'{h}' in '{s}' is not an IPv6 address"));
            }
            let port = match after.strip_prefix(':') {
                Some(p) => parse_port(p, s)?,
                None if after.is_empty() => default_port,
                None => return Err(format!("'{s}': junk after ]")),
            };
            (h.to_string(), port)
        } else if authority.matches(':').count() > 1 {
            // RFC 3986 section 3.2.2: an IPv6 literal is enclosed in brackets.
            return Err(format!(
                "'{s}': an IPv6 address in a URL goes in brackets, as in http://[::1]:8080/"
            ));
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), parse_port(p, s)?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(format!("'{s}' has no host"));
        }
        Ok(Url {
            tls,
            host,
            port,
            path: path.to_string(),
        })
    }
}

fn parse_port(p: &str, s: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("'{p}' in '{s}' is not a port (1-65535)")),
        Ok(v) => Ok(v),
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}{}", self.host, self.port, self.path)
        } else {
            write!(f, "{scheme}://{}:{}{}", self.host, self.port, self.path)
        }
    }
}

/// The HTTP statuses a probe counts as success: whole classes (`2xx`) and single codes
/// (`301`). Anything else is a failure, as wrk and oha count non-2xx answers. Default: `2xx`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectStatus {
    /// `classes[c]`: every status `c00..=c99` is expected (1..=5).
    classes: [bool; 6],
    codes: Vec<u16>,
}

impl Default for ExpectStatus {
    fn default() -> ExpectStatus {
        let mut classes = [false; 6];
        classes[2] = true;
        ExpectStatus {
            classes,
            codes: Vec::new(),
        }
    }
}

impl ExpectStatus {
    pub fn accepts(&self, status: u16) -> bool {
        let class = usize::from(status / 100);
        (class < self.classes.len() && self.classes[class]) || self.codes.contains(&status)
    }
}

impl FromStr for ExpectStatus {
    type Err = String;

    /// A comma-separated list of classes (`2xx`) and codes (`404`), e.g. `2xx,301,404`.
    fn from_str(s: &str) -> Result<ExpectStatus, String> {
        let mut e = ExpectStatus {
            classes: [false; 6],
            codes: Vec::new(),
        };
        for item in s.split(',').map(str::trim) {
            let bad = || format!("'{item}' in '{s}' is not a status class (2xx) or code (100-599)");
            let lower = item.to_ascii_lowercase();
            if let Some(c) = lower.strip_suffix("xx") {
                match c {
                    "1" | "2" | "3" | "4" | "5" => {
                        e.classes[usize::from(c.as_bytes()[0] - b'0')] = true
                    }
                    _ => return Err(bad()),
                }
            } else {
                match item.parse::<u16>() {
                    Ok(code @ 100..=599) => {
                        if !e.codes.contains(&code) {
                            e.codes.push(code);
                        }
                    }
                    _ => return Err(bad()),
                }
            }
        }
        e.codes.sort_unstable();
        Ok(e)
    }
}

impl std::fmt::Display for ExpectStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut items: Vec<String> = (1..self.classes.len())
            .filter(|&c| self.classes[c])
            .map(|c| format!("{c}xx"))
            .collect();
        items.extend(self.codes.iter().map(u16::to_string));
        f.write_str(&items.join(","))
    }
}

impl Serialize for ExpectStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The GET request sent for every iteration.
pub fn request(url: &Url, keepalive: bool) -> Vec<u8> {
    let host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    let conn = if keepalive {
        ""
    } else {
        "Connection: close\r\n"
    };
    format!(
        "GET {} HTTP/1.1\r\nHost: {host}:{}\r\nUser-Agent: tcpdoctor\r\nAccept: */*\r\n{conn}\r\n",
        url.path, url.port
    )
    .into_bytes()
}

/// A response read completely.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The connection may carry another request.
    pub keep_alive: bool,
}

/// Why a response could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// The server closed before the response was complete (`got_bytes` of it arrived).
    Closed {
        got_bytes: usize,
    },
    Malformed(String),
}

enum Body {
    Length(usize),
    Chunked,
    UntilClose,
}

/// Reads one response from `r`, using `buf` as scratch. Calls `first_byte` once, when the
/// first bytes arrive.
pub fn read_response<R: Read>(
    r: &mut R,
    buf: &mut Vec<u8>,
    mut first_byte: impl FnMut(),
) -> Result<Response, ReadError> {
    if buf.len() < 16 * 1024 {
        buf.resize(16 * 1024, 0);
    }
    let mut filled = 0usize;
    let mut seen_any = false;
    // Headers.
    let (status, head_len, body, mut keep_alive) = loop {
        if filled == buf.len() {
            if buf.len() >= 1024 * 1024 {
                return Err(ReadError::Malformed("response headers above 1 MiB".into()));
            }
            let n = buf.len() * 2;
            buf.resize(n, 0);
        }
        let n = read_some(r, &mut buf[filled..])?;
        if n == 0 {
            return Err(ReadError::Closed { got_bytes: filled });
        }
        if !seen_any {
            seen_any = true;
            first_byte();
        }
        filled += n;
        let mut headers = [httparse::EMPTY_HEADER; 48];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf[..filled]) {
            Ok(httparse::Status::Complete(head_len)) => {
                let status = resp.code.unwrap_or(0);
                let mut keep = resp.version == Some(1);
                let mut body = Body::UntilClose;
                for h in resp.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        let v = std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .ok_or_else(|| ReadError::Malformed("bad Content-Length".into()))?;
                        body = Body::Length(v);
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding")
                        && contains_token(h.value, b"chunked")
                    {
                        body = Body::Chunked;
                    } else if h.name.eq_ignore_ascii_case("connection") {
                        if contains_token(h.value, b"close") {
                            keep = false;
                        } else if contains_token(h.value, b"keep-alive") {
                            keep = true;
                        }
                    }
                }
                // 1xx, 204 and 304 have no body (RFC 9112 section 6.3).
                if status / 100 == 1 || status == 204 || status == 304 {
                    body = Body::Length(0);
                }
                break (status, head_len, body, keep);
            }
            Ok(httparse::Status::Partial) => continue,
            Err(e) => return Err(ReadError::Malformed(format!("{e}"))),
        }
    };
    // Body.
    match body {
        Body::Length(len) => {
            let mut have = filled - head_len;
            while have < len {
                let want = (len - have).min(buf.len());
                let n = read_some(r, &mut buf[..want])?;
                if n == 0 {
                    return Err(ReadError::Closed {
                        got_bytes: head_len + have,
                    });
                }
                have += n;
            }
            if have > len {
                // Bytes beyond the response on a request/response connection: a protocol error.
                keep_alive = false;
            }
        }
        Body::UntilClose => {
            keep_alive = false;
            loop {
                if read_some(r, &mut buf[..])? == 0 {
                    break;
                }
            }
        }
        Body::Chunked => {
            let mut pending = buf[head_len..filled].to_vec();
            read_chunked(r, &mut pending, buf)?;
        }
    }
    Ok(Response { status, keep_alive })
}

fn read_some<R: Read>(r: &mut R, b: &mut [u8]) -> Result<usize, ReadError> {
    loop {
        match r.read(b) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Consumes a chunked body: `pending` holds bytes already read past the headers.
fn read_chunked<R: Read>(
    r: &mut R,
    pending: &mut Vec<u8>,
    scratch: &mut [u8],
) -> Result<(), ReadError> {
    let mut pos = 0usize;
    let mut fill = |pending: &mut Vec<u8>, r: &mut R| -> Result<(), ReadError> {
        let n = read_some(r, scratch)?;
        if n == 0 {
            return Err(ReadError::Closed {
                got_bytes: pending.len(),
            });
        }
        pending.extend_from_slice(&scratch[..n]);
        Ok(())
    };
    loop {
        // Chunk-size line.
        let line_end = loop {
            if let Some(i) = pending[pos..].windows(2).position(|w| w == b"\r\n") {
                break pos + i;
            }
            fill(pending, r)?;
        };
        let line = std::str::from_utf8(&pending[pos..line_end])
            .map_err(|_| ReadError::Malformed("chunk size is not text".into()))?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| ReadError::Malformed(format!("bad chunk size '{size_hex}'")))?;
        pos = line_end + 2;
        if size == 0 {
            // Trailers end with an empty line.
            loop {
                if let Some(i) = pending[pos..].windows(2).position(|w| w == b"\r\n") {
                    if i == 0 {
                        return Ok(());
                    }
                    pos += i + 2;
                    continue;
                }
                fill(pending, r)?;
            }
        }
        while pending.len() < pos + size + 2 {
            fill(pending, r)?;
        }
        pos += size + 2;
        if pos > 64 * 1024 {
            pending.drain(..pos);
            pos = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u: Url = "http://127.0.0.1:8080/x?y=1".parse().unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "/x?y=1")
        );
        let u: Url = "http://localhost".parse().unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        let u: Url = "http://[::1]:81/".parse().unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 81));
        let u: Url = "https://a/x".parse().unwrap();
        assert!(u.tls && u.port == 443 && u.to_string() == "https://a:443/x");
        assert!("ftp://a/".parse::<Url>().is_err());
        assert!("http://a:99999/"
            .parse::<Url>()
            .unwrap_err()
            .contains("99999"));
        assert!("http:///x".parse::<Url>().is_err());
        let u: Url = "HTTPS://a/".parse().unwrap();
        assert!(u.tls && u.host == "a");
    }

    /// Issue 24: `ftp://...` was "'//h/x' is not a port"; an unbracketed IPv6 address took
    /// its last group as the port.
    #[test]
    fn an_unsupported_scheme_or_an_unbracketed_ipv6_address_says_so() {
        let e = "ftp://127.0.0.1/x".parse::<Url>().unwrap_err();
        assert!(
            e.contains("ftp:// is not supported") && e.contains("https://"),
            "{e}"
        );
        assert!(!e.contains("is not a port"), "{e}");
        let e = "http://::1:8080/".parse::<Url>().unwrap_err();
        assert!(e.contains("in brackets"), "{e}");
        let e = "http://[::g]:80/".parse::<Url>().unwrap_err();
        assert!(
            e.contains("'::g'") && e.contains("not an IPv6 address"),
            "{e}"
        );
    }

    fn read(bytes: &[u8]) -> Result<Response, ReadError> {
        let mut c = io::Cursor::new(bytes.to_vec());
        let mut buf = Vec::new();
        let mut first = 0;
        let r = read_response(&mut c, &mut buf, || first += 1);
        assert!(first <= 1);
        r
    }

    #[test]
    fn responses() {
        let r = read(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc").unwrap();
        assert_eq!(
            r,
            Response {
                status: 200,
                keep_alive: true
            }
        );
        let r = read(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert_eq!(
            r,
            Response {
                status: 404,
                keep_alive: false
            }
        );
        let r = read(b"HTTP/1.0 200 OK\r\n\r\nuntil close").unwrap();
        assert!(!r.keep_alive);
        let r = read(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.status, 200);
        assert!(r.keep_alive);
    }

    #[test]
    fn expected_statuses() {
        let d = ExpectStatus::default();
        assert!(d.accepts(200) && d.accepts(204) && !d.accepts(301) && !d.accepts(404));
        let e: ExpectStatus = "2xx,301, 404".parse().unwrap();
        assert!(e.accepts(201) && e.accepts(301) && e.accepts(404));
        assert!(!e.accepts(302) && !e.accepts(500));
        assert_eq!(e.to_string(), "2xx,301,404");
        let e: ExpectStatus = "3XX".parse().unwrap();
        assert!(e.accepts(302) && !e.accepts(200));
        for bad in ["", "6xx", "0xx", "2x", "99", "600", "abc", "2xx,"] {
            let err = bad.parse::<ExpectStatus>().unwrap_err();
            assert!(err.contains(&format!("'{bad}'")), "{bad}: {err}");
        }
    }

    #[test]
    fn truncated_and_malformed() {
        assert!(matches!(
            read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"),
            Err(ReadError::Closed { .. })
        ));
        assert!(matches!(
            read(b"HTTP/1.1 200"),
            Err(ReadError::Closed { .. })
        ));
        assert!(matches!(
            read(b"garbage\r\n\r\n"),
            Err(ReadError::Malformed(_))
        ));
        assert!(matches!(
            read(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            Err(ReadError::Malformed(_))
        ));
    }
}
