//! [`Merge`]: several captures read as one, packets in time order, the way `mergecap`
//! (Wireshark) merges them by default: a k-way merge on the packets' timestamps. Packets of
//! one file keep their order; a tie in time between files goes to the file named last, as
//! mergecap's `is_earlier` (wiretap/merge.c: "earlier or equal") decides, so that frame
//! numbers are the same as in mergecap's output (checked against mergecap 4.0 in the tests).
//!
//! Frames of the merged capture are numbered as `mergecap -w merged.pcap FILE...` numbers
//! them (every packet counts, TCP or not), so a frame number in a finding is unambiguous and
//! opens the right packet in Wireshark on the merged file; a capture split in two
//! (`tcpdump -C`, `editcap -c`) gets the frame numbers of the unsplit one.
//!
//! A read error in any input ends the merge there (later packets of the other inputs are not
//! read: analysing one side of a conversation without the other would invent losses); the
//! segments before it are returned first and the error, which names its file and byte
//! offset, after them. Memory: one batch of segments per input.

use std::path::Path;

use serde::Serialize;

use crate::error::Error;
use crate::reader::{Compression, Format, LinkTypeCount, Reader, Stats};
use crate::segment::Segment;
use crate::Source;

/// Segments read ahead per input.
const AHEAD: usize = 256;

/// One input of a merge as read so far (in [`Stats::inputs`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputStats {
    /// The input's name as used in errors.
    pub name: String,
    pub format: Format,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// Packet records read from this input.
    pub packets: u64,
    pub tcp_segments: u64,
    /// Bytes consumed from the (decompressed) input.
    pub bytes_read: u64,
}

struct Head {
    reader: Reader,
    buf: Vec<Segment>,
    pos: usize,
    len: usize,
    ended: bool,
}

/// Several captures as one stream of segments in time order. See the module documentation.
pub struct Merge {
    heads: Vec<Head>,
    stats: Stats,
    /// Packets of the merged capture so far (the last frame number given).
    packets: u64,
    /// An error met after some segments, returned by the next call.
    pending: Option<Error>,
    done: bool,
}

impl Merge {
    /// Opens every path (`-` is stdin) as a [`Reader`]; the first that cannot be opened is
    /// the error.
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> Result<Merge, Error> {
        let readers = paths
            .iter()
            .map(|p| Reader::open(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Merge::new(readers))
    }

    /// Merges readers already opened, in this order (ties in time go to the later one).
    pub fn new(readers: Vec<Reader>) -> Merge {
        let heads: Vec<Head> = readers
            .into_iter()
            .map(|mut reader| {
                reader.keep_skipped = true;
                Head {
                    reader,
                    buf: vec![Segment::EMPTY; AHEAD],
                    pos: 0,
                    len: 0,
                    ended: false,
                }
            })
            .collect();
        let mut m = Merge {
            stats: heads
                .first()
                .map(|h| h.reader.stats().clone())
                .unwrap_or_else(|| Stats::new(Format::PcapNg, None)),
            heads,
            packets: 0,
            pending: None,
            done: false,
        };
        m.update_stats();
        m
    }

    /// The inputs' names joined with ` + `.
    pub fn name(&self) -> String {
        let names: Vec<&str> = self.heads.iter().map(|h| h.reader.name()).collect();
        names.join(" + ")
    }

    /// Counts so far, summed over the inputs; `inputs` lists each one. Frame numbers in it
    /// (`first_undecodable_frame`) are the merged capture's.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Like [`Reader::read_batch`]: fills `out` with the next segments of the merged capture
    /// (their `frame` renumbered), `Ok(0)` at the end; an error after some segments is
    /// returned by the next call, and every call after an error returns `Ok(0)`.
    pub fn read_batch(&mut self, out: &mut [Segment]) -> Result<usize, Error> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut n = 0;
        while n < out.len() && !self.done {
            let Some(i) = self.earliest() else { break };
            let h = &mut self.heads[i];
            let mut seg = h.buf[h.pos];
            h.pos += 1;
            self.packets += 1;
            if seg.is_skipped_packet() {
                if self.stats.first_undecodable_frame.is_none()
                    && h.reader.stats().first_undecodable_frame == Some(seg.frame)
                {
                    self.stats.first_undecodable_frame = Some(self.packets);
                }
                continue;
            }
            seg.frame = self.packets;
            out[n] = seg;
            n += 1;
        }
        self.update_stats();
        match self.pending.take() {
            Some(e) if n == 0 => Err(e),
            e => {
                self.pending = e;
                Ok(n)
            }
        }
    }

    /// Index of the input whose next packet comes first (refilling inputs as needed);
    /// `None` when all have ended or one failed (then `pending` holds its error).
    fn earliest(&mut self) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for i in 0..self.heads.len() {
            let h = &mut self.heads[i];
            if h.pos == h.len && !h.ended {
                h.pos = 0;
                h.len = 0;
                match h.reader.read_batch(&mut h.buf) {
                    Ok(0) => h.ended = true,
                    Ok(k) => h.len = k,
                    Err(e) => {
                        h.ended = true;
                        self.pending = Some(e);
                        self.done = true;
                        return None;
                    }
                }
            }
            if h.pos < h.len {
                let ts = h.buf[h.pos].ts_ns;
                // Earlier or equal: a tie goes to the input named last, as in mergecap.
                if best.is_none_or(|(t, _)| ts <= t) {
                    best = Some((ts, i));
                }
            }
        }
        if best.is_none() {
            self.done = true;
        }
        best.map(|(_, i)| i)
    }

    /// Sums the inputs' counts into `stats` (keeping the merged frame numbers it holds).
    fn update_stats(&mut self) {
        let first_undecodable = self.stats.first_undecodable_frame;
        let mut sum: Option<Stats> = None;
        let mut inputs = Vec::with_capacity(self.heads.len());
        for h in &self.heads {
            let s = h.reader.stats();
            inputs.push(InputStats {
                name: h.reader.name().to_string(),
                format: s.format,
                compression: s.compression,
                packets: s.packets,
                tcp_segments: s.tcp_segments,
                bytes_read: s.bytes_read,
            });
            let Some(t) = sum.as_mut() else {
                sum = Some(s.clone());
                continue;
            };
            t.packets += s.packets;
            t.tcp_segments += s.tcp_segments;
            t.non_tcp += s.non_tcp;
            t.ip_later_fragments += s.ip_later_fragments;
            t.undecodable += s.undecodable;
            t.undecodable_truncated += s.undecodable_truncated;
            t.undecodable_link_type += s.undecodable_link_type;
            t.cut_by_snaplen += s.cut_by_snaplen;
            t.interfaces += s.interfaces;
            t.capture_drops += s.capture_drops;
            t.bytes_read += s.bytes_read;
            if t.compression != s.compression {
                t.compression = None;
                t.gzip = false;
            }
            for lt in &s.link_types {
                match t
                    .link_types
                    .iter_mut()
                    .find(|c| c.link_type == lt.link_type)
                {
                    Some(c) => c.packets += lt.packets,
                    None => t.link_types.push(LinkTypeCount { ..lt.clone() }),
                }
            }
        }
        if let Some(mut t) = sum {
            t.first_undecodable_frame = first_undecodable;
            t.inputs = inputs;
            self.stats = t;
        }
    }
}

impl Source for Merge {
    fn read_batch(&mut self, out: &mut [Segment]) -> Result<usize, Error> {
        Merge::read_batch(self, out)
    }
    fn stats(&self) -> &Stats {
        Merge::stats(self)
    }
}
