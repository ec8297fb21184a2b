//! Solaris/illumos snoop (RFC 1761): the file header and its packet records.

use super::{u32_at, Iface, Reader, Rec, State, TsScale, MAX_RECORD_BYTES, SNOOP_MAGIC};
use crate::decode::{linktype, Link};
use crate::error::{Error, ErrorKind};
use crate::reader::Format;

impl Reader {
    pub(super) fn open_snoop(&mut self) -> Result<(), Error> {
        self.need(16, "snoop file header")?;
        let h = self.input.peek(16);
        if &h[..8] != SNOOP_MAGIC {
            let mut magic = [0u8; 4];
            magic.copy_from_slice(&h[..4]);
            return Err(self.err(0, ErrorKind::UnknownFormat { magic }));
        }
        let version = u32_at(h, 8, true);
        let datalink = u32_at(h, 12, true);
        if !(2..=5).contains(&version) {
            return Err(self.err(
                8,
                ErrorKind::Unsupported {
                    what: "snoop version",
                    detail: format!("version {version}, expected 2"),
                },
            ));
        }
        self.input.consume(16);
        // RFC 1761 datalink types; 0x80000000 and up are Solaris/illumos private types
        // (sys/dlpi.h): DL_IPV4 and DL_IPV6 tunnels carry bare IP, DL_IPNET an ipnet header.
        let lt = match datalink {
            0 | 4 => linktype::ETHERNET,
            0x8000_0001 | 0x8000_0002 => linktype::RAW,
            0x8000_0005 => linktype::IPNET,
            other => other | 0x4000_0000, // not a LINKTYPE: counted as unsupported
        };
        self.stats.format = Format::Snoop;
        self.stats.interfaces = 1;
        let link_idx = self.stats.link_index(lt);
        self.state = State::Snoop {
            iface: Iface {
                link: Link::from_linktype(lt),
                link_idx,
                scale: TsScale::Mul(1000),
                offset_s: 0,
                snaplen: 0,
            },
        };
        Ok(())
    }

    pub(super) fn snoop_record(&mut self, iface: Iface) -> Result<Option<Rec>, Error> {
        if !self.need_or_end(24, "snoop record header")? {
            return Ok(None);
        }
        let h = self.input.peek(24);
        let orig_len = u32_at(h, 0, true);
        let caplen = u32_at(h, 4, true) as usize;
        let rec_len = u32_at(h, 8, true) as usize;
        let drops = u32_at(h, 12, true);
        let sec = u64::from(u32_at(h, 16, true));
        let usec = u64::from(u32_at(h, 20, true));
        if rec_len > MAX_RECORD_BYTES || rec_len < 24 + caplen {
            return Err(self.err(
                self.input.offset() + 8,
                ErrorKind::Corrupt {
                    what: "snoop record",
                    detail: format!(
                        "record length {rec_len} does not hold 24 + {caplen} captured bytes"
                    ),
                },
            ));
        }
        self.need(rec_len, "snoop record")?;
        let start = self.input.pos() + 24;
        self.input.consume(rec_len);
        // Cumulative drops since the capture started (RFC 1761 section 3.2).
        self.stats.capture_drops = u64::from(drops);
        Ok(Some(Rec {
            start,
            caplen,
            orig_len,
            ts_ns: sec * 1_000_000_000 + usec * 1000,
            link: iface.link,
            link_idx: iface.link_idx,
        }))
    }
}
