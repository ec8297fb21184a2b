//! [`Error`]: what went wrong reading a capture, and where (file name and byte offset).
//!
//! Every error names the input and the byte offset at which reading stopped, so a user can
//! look at the bytes (`xxd -s OFFSET`). Segments returned before an error stay valid.

use std::fmt;
use std::io;

/// A capture could not be opened or read past `offset`.
#[derive(Debug)]
pub struct Error {
    /// The input's name as given (a path, or `stdin`).
    pub name: String,
    /// Byte offset in the input (after decompression when the input is gzip, xz or zstd) of the
    /// header or record that could not be read.
    pub offset: u64,
    pub kind: ErrorKind,
}

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file could not be opened.
    Open(io::Error),
    /// Reading (or decompressing) failed.
    Io(io::Error),
    /// The input holds no bytes at all.
    Empty,
    /// The first bytes are none of the known magic numbers.
    UnknownFormat { magic: [u8; 4] },
    /// The input ended inside a header or record.
    Truncated {
        what: &'static str,
        needs: u64,
        left: u64,
    },
    /// A header or record holds impossible values.
    Corrupt { what: &'static str, detail: String },
    /// A well-formed file in a variant this reader does not support.
    Unsupported { what: &'static str, detail: String },
    /// Packet `frame`'s time is `back_ns` before the latest packet's before it, more than
    /// [`crate::reader::BACK_IN_TIME`]: not one capture in time order.
    OutOfOrder { frame: u64, back_ns: u64 },
}

impl Error {
    pub(crate) fn new(name: &str, offset: u64, kind: ErrorKind) -> Error {
        Error {
            name: name.to_string(),
            offset,
            kind,
        }
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Open(e) => write!(f, "{}: cannot open: {e}", self.name),
            kind => write!(f, "{}: byte offset {}: {kind}", self.name, self.offset),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Open(e) => write!(f, "cannot open: {e}"),
            ErrorKind::Io(e) => write!(f, "read failed: {e}"),
            ErrorKind::Empty => write!(f, "empty input, no capture file header"),
            ErrorKind::UnknownFormat { magic } => write!(
                f,
                "not a pcap, pcapng or snoop capture (first bytes {:02x} {:02x} {:02x} {:02x})",
                magic[0], magic[1], magic[2], magic[3]
            ),
            ErrorKind::Truncated { what, needs, left } => {
                write!(f, "truncated {what} (needs {needs} bytes, {left} left)")
            }
            ErrorKind::Corrupt { what, detail } => write!(f, "corrupt {what}: {detail}"),
            ErrorKind::Unsupported { what, detail } => write!(f, "unsupported {what}: {detail}"),
            ErrorKind::OutOfOrder { frame, back_ns } => write!(
                f,
                "frame {frame} is {:.3} s older than a packet before it: the packets are not in time order (captures joined one after another, as mergecap -a does, or the clock set back while capturing); sort them first (reordercap IN OUT), or split the file there (editcap -r IN OUT 1-{})",
                *back_ns as f64 / 1e9,
                frame - 1
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Open(e) | ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}
