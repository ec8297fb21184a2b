//! pcapng (draft-ietf-opsawg-pcapng): sections, interface descriptions, packet blocks and
//! interface statistics. [`Reader::pcapng_run`] frames Enhanced Packet Blocks already in the
//! buffer in a tight loop; [`Reader::pcapng_record`] reads any block the general way.

use std::ops::Range;

use super::{u16_at, u32_at, Iface, Reader, Rec, State, Stats, TsScale, MAX_RECORD_BYTES};
use crate::decode::{self, Link};
use crate::error::{Error, ErrorKind};
use crate::segment::Segment;

pub(super) const NG_SHB: u32 = 0x0a0d_0d0a;
const NG_BOM: u32 = 0x1a2b_3c4d;

impl Reader {
    /// The pcapng counterpart of [`pcap_run`](Self::pcap_run): decodes the Enhanced Packet
    /// Blocks of described interfaces already in the read buffer into `out[n..]`; any other
    /// block, or anything unusual, is left to the general path. `BIG`: the section's byte
    /// order; `ETH`: every interface described so far is Ethernet.
    #[inline(always)]
    pub(super) fn pcapng_run<const BIG: bool, const ETH: bool>(
        &mut self,
        out: &mut [Segment],
        mut n: usize,
    ) -> usize {
        let State::PcapNg {
            ifaces, last_ts_ns, ..
        } = &mut self.state
        else {
            return n;
        };
        let buf = self.input.buffered();
        let st = &mut self.stats;
        let before = st.packets;
        let mut packets = before;
        let mut cut = 0u64;
        let mut p = 0usize;
        let n0 = n;
        while let Some(seg) = out.get_mut(n) {
            // Block type, total length, interface id, timestamp (high, low), captured and
            // original lengths (pcapng 4.3).
            let Some(h) = buf.get(p..p + 28) else { break };
            let blen = u32_at(h, 4, BIG) as usize;
            if u32_at(h, 0, BIG) != 6
                || blen < 32
                || !blen.is_multiple_of(4)
                || blen > MAX_RECORD_BYTES
            {
                break;
            }
            let Some(b) = buf.get(p..p + blen) else { break };
            let caplen = u32_at(h, 20, BIG) as usize;
            if u32_at(b, blen - 4, BIG) as usize != blen || caplen > blen - 32 {
                break;
            }
            let Some(iface) = ifaces.get(u32_at(h, 8, BIG) as usize) else {
                break;
            };
            let units = (u64::from(u32_at(h, 12, BIG)) << 32) | u64::from(u32_at(h, 16, BIG));
            let ts_ns = match iface.scale {
                TsScale::Mul(m) if iface.offset_s == 0 => match units.checked_mul(m) {
                    Some(ns) => ns,
                    None => iface.scale.ns(units, 0),
                },
                scale => scale.ns(units, iface.offset_s),
            };
            if ts_ns.saturating_add(super::BACK_IN_TIME_NS) < self.latest_ns {
                // Left to the general path, which reports it.
                break;
            }
            self.latest_ns = self.latest_ns.max(ts_ns);
            let orig_len = u32_at(h, 24, BIG);
            let frame = &b[28..28 + caplen];
            p += blen;
            packets += 1;
            cut += u64::from((caplen as u64) < u64::from(orig_len));
            st.link_types[iface.link_idx].packets += 1;
            *last_ts_ns = ts_ns;
            let link = if ETH { Link::Ethernet } else { iface.link };
            // A successful decode sets every field but these two.
            match decode::decode(link, frame, orig_len.max(caplen as u32), seg) {
                Ok(()) => {
                    seg.frame = packets;
                    seg.ts_ns = ts_ns;
                    n += 1;
                }
                Err(skip) => st.skipped(skip, packets),
            }
        }
        st.tcp_segments += (n - n0) as u64;
        st.packets = packets;
        st.cut_by_snaplen += cut;
        self.input.consume(p);
        n
    }
    /// Frames the next packet block, reading past the blocks that describe the capture;
    /// `None` at a clean end of input.
    pub(super) fn pcapng_record(&mut self) -> Result<Option<Rec>, Error> {
        loop {
            let Some(Framed {
                off,
                btype,
                big,
                body,
            }) = self.pcapng_block()?
            else {
                return Ok(None);
            };
            let State::PcapNg {
                big: sec_big,
                ifaces,
                last_ts_ns,
                unknown_idx,
            } = &mut self.state
            else {
                unreachable!("pcapng_record called on another format")
            };
            let block = Block {
                name: &self.name,
                off,
                big,
                b: &self.input.buf[body.clone()],
            };
            let st = &mut self.stats;
            match btype {
                NG_SHB => {
                    block.section_header()?;
                    *sec_big = big;
                    ifaces.clear();
                }
                // Interface Description Block (pcapng 4.2).
                1 => ifaces.push(block.interface(st)?),
                // Enhanced Packet Block (4.3) and the obsolete Packet Block (appendix A).
                6 | 2 => {
                    let (id, units, caplen, orig_len) = block.packet(btype)?;
                    let (link, link_idx, ts_ns) = match ifaces.get(id) {
                        Some(i) => (i.link, i.link_idx, i.scale.ns(units, i.offset_s)),
                        None => (Link::Unsupported, unknown(unknown_idx, st), *last_ts_ns),
                    };
                    *last_ts_ns = ts_ns;
                    return Ok(Some(Rec {
                        start: body.start + 20,
                        caplen,
                        orig_len,
                        ts_ns,
                        link,
                        link_idx,
                    }));
                }
                // Simple Packet Block (4.4): interface 0, no timestamp (the previous packet's
                // is used), captured length implied by the block length and snap length.
                3 => {
                    let (link, link_idx, snaplen) = match ifaces.first() {
                        Some(i) => (i.link, i.link_idx, i.snaplen),
                        None => (Link::Unsupported, unknown(unknown_idx, st), 0),
                    };
                    let (caplen, orig_len) = block.simple_packet(snaplen)?;
                    return Ok(Some(Rec {
                        start: body.start + 4,
                        caplen,
                        orig_len,
                        ts_ns: *last_ts_ns,
                        link,
                        link_idx,
                    }));
                }
                // Interface Statistics Block (4.6): isb_ifdrop (option 5) per interface.
                5 => block.statistics(st),
                // Name resolution, decryption secrets, custom blocks...: nothing for TCP.
                _ => {}
            }
        }
    }

    /// Reads one block's framing, checks its lengths and consumes it: its offset, type,
    /// byte order and body (in the input buffer). `None` at a clean end of input.
    fn pcapng_block(&mut self) -> Result<Option<Framed>, Error> {
        if !self.need_or_end(12, "pcapng block header")? {
            return Ok(None);
        }
        let off = self.input.offset();
        let h = self.input.peek(12);
        let State::PcapNg { big, .. } = self.state else {
            unreachable!("pcapng_block called on another format")
        };
        let big = if u32_at(h, 0, false) == NG_SHB {
            // The byte-order magic decides the byte order of this whole section.
            match u32_at(h, 8, false) {
                NG_BOM => false,
                0x4d3c_2b1a => true,
                other => {
                    return Err(self.err(
                        off + 8,
                        ErrorKind::Corrupt {
                            what: "pcapng section header",
                            detail: format!("byte-order magic {other:#010x}"),
                        },
                    ))
                }
            }
        } else {
            big
        };
        let btype = u32_at(h, 0, big);
        let blen = u32_at(h, 4, big) as usize;
        if blen < 12 || !blen.is_multiple_of(4) || blen > MAX_RECORD_BYTES {
            return Err(self.err(
                off + 4,
                ErrorKind::Corrupt {
                    what: "pcapng block",
                    detail: format!("block length {blen} (type {btype:#x})"),
                },
            ));
        }
        self.need(blen, "pcapng block")?;
        let start = self.input.pos();
        let trailing = u32_at(&self.input.buf[start..start + blen], blen - 4, big) as usize;
        if trailing != blen {
            return Err(self.err(
                off + blen as u64 - 4,
                ErrorKind::Corrupt {
                    what: "pcapng block",
                    detail: format!(
                        "trailing length {trailing} differs from leading length {blen}"
                    ),
                },
            ));
        }
        self.input.consume(blen);
        Ok(Some(Framed {
            off,
            btype,
            big,
            body: start + 8..start + blen - 4,
        }))
    }
}

/// A block framed by [`Reader::pcapng_block`].
struct Framed {
    /// Offset of its first byte in the input.
    off: u64,
    btype: u32,
    /// The byte order of its section.
    big: bool,
    /// Its body in the input buffer (after the type and length, before the trailing length).
    body: Range<usize>,
}

/// The stats slot for packets naming an interface that was never described.
fn unknown(idx: &mut Option<usize>, st: &mut Stats) -> usize {
    *idx.get_or_insert_with(|| st.link_index(u32::MAX))
}

/// One block's body, with what its errors name: the file and the block's offset.
struct Block<'a> {
    name: &'a str,
    off: u64,
    big: bool,
    b: &'a [u8],
}

impl Block<'_> {
    fn corrupt(&self, what: &'static str, detail: String) -> Error {
        Error::new(self.name, self.off, ErrorKind::Corrupt { what, detail })
    }

    /// Fails unless the body holds at least `n` bytes.
    fn at_least(&self, n: usize, what: &'static str) -> Result<(), Error> {
        if self.b.len() < n {
            return Err(self.corrupt(what, format!("body of {} bytes", self.b.len())));
        }
        Ok(())
    }

    /// The options from `at` on: (code, value) until the end-of-options or a short one.
    fn options(&self, at: usize) -> impl Iterator<Item = (u16, &[u8])> {
        let big = self.big;
        let mut o = self.b.get(at..).unwrap_or_default();
        std::iter::from_fn(move || {
            if o.len() < 4 {
                return None;
            }
            let code = u16_at(o, 0, big);
            let len = usize::from(u16_at(o, 2, big));
            let padded = (len + 3) & !3;
            if code == 0 || o.len() < 4 + padded {
                return None;
            }
            let v = &o[4..4 + len];
            o = &o[4 + padded..];
            Some((code, v))
        })
    }

    fn section_header(&self) -> Result<(), Error> {
        self.at_least(16, "pcapng section header")?;
        let major = u16_at(self.b, 4, self.big);
        if major != 1 {
            return Err(Error::new(
                self.name,
                self.off + 12,
                ErrorKind::Unsupported {
                    what: "pcapng version",
                    detail: format!("major version {major}, expected 1"),
                },
            ));
        }
        Ok(())
    }

    /// An interface description: link type, snap length, if_tsresol (9) and if_tsoffset (14).
    fn interface(&self, st: &mut Stats) -> Result<Iface, Error> {
        self.at_least(8, "pcapng interface description")?;
        let lt = u32::from(u16_at(self.b, 0, self.big));
        let snaplen = u32_at(self.b, 4, self.big);
        let mut scale = TsScale::Mul(1000); // default if_tsresol 6: microseconds
        let mut offset_s = 0i64;
        for (code, v) in self.options(8) {
            match (code, v.len()) {
                (9, 1..) => scale = TsScale::from_tsresol(v[0]),
                (14, 8) => offset_s = u64_of(v, self.big) as i64,
                _ => {}
            }
        }
        let link_idx = st.link_index(lt);
        st.interfaces += 1;
        Ok(Iface {
            link: Link::from_linktype(lt),
            link_idx,
            scale,
            offset_s,
            snaplen,
        })
    }

    /// An (enhanced) packet block's interface id, timestamp units, captured and original
    /// lengths.
    fn packet(&self, btype: u32) -> Result<(usize, u64, usize, u32), Error> {
        let (b, big) = (self.b, self.big);
        self.at_least(20, "pcapng packet block")?;
        let id = if btype == 6 {
            u32_at(b, 0, big) as usize
        } else {
            usize::from(u16_at(b, 0, big))
        };
        let units = (u64::from(u32_at(b, 4, big)) << 32) | u64::from(u32_at(b, 8, big));
        let caplen = u32_at(b, 12, big) as usize;
        if caplen > b.len() - 20 {
            return Err(self.corrupt(
                "pcapng packet block",
                format!(
                    "captured length {caplen} exceeds the block's {} data bytes",
                    b.len() - 20
                ),
            ));
        }
        Ok((id, units, caplen, u32_at(b, 16, big)))
    }

    /// A simple packet block's captured and original lengths.
    fn simple_packet(&self, snaplen: u32) -> Result<(usize, u32), Error> {
        self.at_least(4, "pcapng simple packet block")?;
        let orig_len = u32_at(self.b, 0, self.big);
        let mut caplen = (orig_len as usize).min(self.b.len() - 4);
        if snaplen != 0 {
            caplen = caplen.min(snaplen as usize);
        }
        Ok((caplen, orig_len))
    }

    /// Interface statistics: the largest isb_ifdrop (5) is the capture's drops.
    fn statistics(&self, st: &mut Stats) {
        if self.b.len() < 12 {
            return;
        }
        for (code, v) in self.options(12) {
            if code == 5 && v.len() == 8 {
                st.capture_drops = st.capture_drops.max(u64_of(v, self.big));
            }
        }
    }
}

/// An 8-byte option value in the section's byte order.
fn u64_of(v: &[u8], big: bool) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&v[..8]);
    if big {
        u64::from_be_bytes(raw)
    } else {
        u64::from_le_bytes(raw)
    }
}
