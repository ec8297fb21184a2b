//! Capture files to TCP segments: pcap, pcapng and snoop readers, link-layer and IP/TCP
//! decoding. Reads bytes only: no clock, no syscalls beyond reading its input.

pub mod segment;

pub use segment::{Segment, TcpFlags, TcpOptions};
