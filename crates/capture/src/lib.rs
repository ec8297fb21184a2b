//! Capture files to TCP segments: pcap, pcapng and snoop readers, link-layer and IP/TCP
//! decoding, and a small pcap writer for tests. Reads bytes only: no clock, no syscalls
//! beyond reading its input.
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
pub mod reader;
pub mod segment;
pub mod write;

pub use decode::linktype;
pub use error::{Error, ErrorKind};
pub use reader::{Format, LinkTypeCount, Reader, Stats};
pub use segment::{Segment, TcpFlags, TcpOptions};
