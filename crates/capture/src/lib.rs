//! Capture files to TCP segments: pcap, pcapng and snoop readers (gzip, xz, zstd; several
//! files merged in time order by [`Merge`]), link-layer and IP/TCP
//! decoding, and a small pcap writer for tests. Reads bytes only: no clock, no syscalls
//! beyond reading its input. Regular files are mapped; the first one mapped installs a SIGBUS
//! handler that only acts on faults inside mapped captures (a file truncated while read,
//! `input/guard.rs`) and hands every other SIGBUS to the handler that was there before.
//!
//! ```no_run
//! # fn main() -> Result<(), tcpdoctor_capture::Error> {
//! let mut r = tcpdoctor_capture::Reader::open(std::path::Path::new("trace.pcap"))?;
//! while let Some(seg) = r.next_segment()? {
//!     println!("{} {}:{} > {}:{} seq {}", seg.frame, seg.src, seg.src_port, seg.dst, seg.dst_port, seg.seq);
//! }
//! println!("{} packets, {} not TCP", r.stats().packets, r.stats().non_tcp);
//! # Ok(()) }
//! ```

mod decode;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
mod input;
pub mod merge;
pub mod reader;
pub mod segment;
pub mod write;

pub use decode::linktype;
pub use error::{Error, ErrorKind};
pub use merge::{InputStats, Merge};
pub use reader::{Compression, Format, LinkTypeCount, Reader, Stats};
pub use segment::{Segment, TcpFlags, TcpOptions};

/// Where segments come from: one [`Reader`] or a [`Merge`] of several.
pub trait Source: Send {
    /// Fills `out` from the start with the next segments; `Ok(0)` at the end. An error met
    /// after some segments comes with the next call; every call after an error is `Ok(0)`.
    fn read_batch(&mut self, out: &mut [Segment]) -> Result<usize, Error>;
    /// Counts so far.
    fn stats(&self) -> &Stats;
}
