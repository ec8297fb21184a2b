//! Names of kernel enums read from the running kernel's BTF (/sys/kernel/btf/vmlinux): the
//! drop reasons of `skb:kfree_skb` (`enum skb_drop_reason`) and the reset reasons of
//! `tcp:tcp_send_reset` (`enum sk_rst_reason`). Their values move between kernel versions,
//! so they are never compiled in.
//!
//! A minimal reader of the BTF format (Documentation/bpf/btf.rst): the header, then the type
//! section walked record by record to find one enum by name. Every offset is checked against
//! the buffer; malformed input is an error, never a panic.

use std::collections::BTreeMap;

const MAGIC: u16 = 0xeb9f;

/// Why the BTF could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BtfError(pub String);

impl std::fmt::Display for BtfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(msg: impl Into<String>) -> BtfError {
    BtfError(msg.into())
}

struct Reader<'a> {
    types: &'a [u8],
    strings: &'a [u8],
}

fn u32_at(b: &[u8], o: usize) -> Result<u32, BtfError> {
    b.get(o..o + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| err(format!("truncated at byte {o}")))
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Result<Reader<'a>, BtfError> {
        if b.len() < 24 {
            return Err(err("shorter than a BTF header"));
        }
        if u16::from_le_bytes([b[0], b[1]]) != MAGIC {
            return Err(err("not little-endian BTF (bad magic)"));
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let type_off = u32_at(b, 8)? as usize;
        let type_len = u32_at(b, 12)? as usize;
        let str_off = u32_at(b, 16)? as usize;
        let str_len = u32_at(b, 20)? as usize;
        let section = |off: usize, len: usize, what: &str| {
            hdr_len
                .checked_add(off)
                .and_then(|s| s.checked_add(len).map(|e| (s, e)))
                .and_then(|(s, e)| b.get(s..e))
                .ok_or_else(|| err(format!("{what} section outside the file")))
        };
        Ok(Reader {
            types: section(type_off, type_len, "type")?,
            strings: section(str_off, str_len, "string")?,
        })
    }

    fn name(&self, off: u32) -> Result<&'a str, BtfError> {
        let s = self
            .strings
            .get(off as usize..)
            .ok_or_else(|| err(format!("string offset {off} outside the string section")))?;
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..end]).map_err(|_| err(format!("string at {off} is not UTF-8")))
    }

    /// The members of the enum (32- or 64-bit) named `wanted`, as value -> name.
    fn find_enum(&self, wanted: &str) -> Result<Option<BTreeMap<u64, String>>, BtfError> {
        let t = self.types;
        let mut o = 0usize;
        while o < t.len() {
            let name_off = u32_at(t, o)?;
            let info = u32_at(t, o + 4)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            o += 12;
            let extra = match kind {
                1 => 4,             // INT
                3 => 12,            // ARRAY
                4 | 5 => 12 * vlen, // STRUCT, UNION
                6 => 8 * vlen,      // ENUM
                13 => 8 * vlen,     // FUNC_PROTO
                14 => 4,            // VAR
                15 => 12 * vlen,    // DATASEC
                17 => 4,            // DECL_TAG
                19 => 12 * vlen,    // ENUM64
                2 | 7..=12 | 16 | 18 => 0,
                k => return Err(err(format!("unknown BTF kind {k} at type byte {}", o - 12))),
            };
            if (kind == 6 || kind == 19) && name_off != 0 && self.name(name_off)? == wanted {
                let mut out = BTreeMap::new();
                let step = if kind == 6 { 8 } else { 12 };
                for i in 0..vlen {
                    let m = o + i * step;
                    let n = self.name(u32_at(t, m)?)?;
                    let v = if kind == 6 {
                        u64::from(u32_at(t, m + 4)?)
                    } else {
                        u64::from(u32_at(t, m + 4)?) | (u64::from(u32_at(t, m + 8)?) << 32)
                    };
                    out.insert(v, n.to_string());
                }
                return Ok(Some(out));
            }
            o += extra;
        }
        Ok(None)
    }
}

/// Value -> name of one kernel enum, with a prefix removed from each name
/// (`SKB_DROP_REASON_QDISC_DROP` -> `QDISC_DROP`). Serialized as value -> name (a recorded
/// trace keeps the names of the kernel it was recorded on: [`crate::recording`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct EnumNames {
    names: BTreeMap<u64, String>,
}

impl EnumNames {
    /// Reads enum `name` from BTF bytes; `Ok(None)` when this kernel has no such enum.
    pub fn from_btf(btf: &[u8], name: &str, prefix: &str) -> Result<Option<EnumNames>, BtfError> {
        let r = Reader::new(btf)?;
        Ok(r.find_enum(name)?.map(|m| EnumNames {
            names: m
                .into_iter()
                .map(|(v, n)| (v, n.strip_prefix(prefix).unwrap_or(&n).to_string()))
                .collect(),
        }))
    }

    /// A table from (value, name) pairs.
    pub fn from_pairs(pairs: &[(u64, &str)]) -> EnumNames {
        EnumNames {
            names: pairs.iter().map(|&(v, n)| (v, n.to_string())).collect(),
        }
    }

    /// The name of `value`, or `None` when this kernel does not define it.
    pub fn get(&self, value: u32) -> Option<&str> {
        self.names.get(&u64::from(value)).map(String::as_str)
    }

    /// The value of `name`, if this kernel defines it.
    pub fn value(&self, name: &str) -> Option<u32> {
        self.names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .and_then(|(&v, _)| u32::try_from(v).ok())
    }

    /// The name of `value`, or `reason_<value>` when unknown.
    pub fn describe(&self, value: u32) -> String {
        self.get(value)
            .map(str::to_string)
            .unwrap_or_else(|| format!("reason_{value}"))
    }
}

/// The kernel's drop and reset reasons.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reasons {
    pub drop: EnumNames,
    pub reset: EnumNames,
}

impl Reasons {
    /// Reads both enums from BTF bytes (missing enums leave empty tables).
    pub fn from_btf(btf: &[u8]) -> Result<Reasons, BtfError> {
        Ok(Reasons {
            drop: EnumNames::from_btf(btf, "skb_drop_reason", "SKB_DROP_REASON_")?
                .unwrap_or_default(),
            reset: EnumNames::from_btf(btf, "sk_rst_reason", "SK_RST_REASON_")?.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with one INT and one ENUM `e` { A_X = 2, A_Y = 7 }.
    fn blob() -> Vec<u8> {
        let strings = b"\0int\0e\0A_X\0A_Y\0".to_vec();
        let mut types = Vec::new();
        // INT "int": name_off 1, kind 1, size 4, encoding word.
        for v in [1u32, 1 << 24, 4, 32] {
            types.extend_from_slice(&v.to_le_bytes());
        }
        // ENUM "e": name_off 5, kind 6, vlen 2, size 4; members.
        for v in [5u32, (6 << 24) | 2, 4, 7, 2, 11, 7] {
            types.extend_from_slice(&v.to_le_bytes());
        }
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.push(1);
        b.push(0);
        for v in [
            24u32,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&types);
        b.extend_from_slice(&strings);
        b
    }

    #[test]
    fn finds_an_enum_by_name_and_strips_the_prefix() {
        let n = EnumNames::from_btf(&blob(), "e", "A_").unwrap().unwrap();
        assert_eq!(n.get(2), Some("X"));
        assert_eq!(n.get(7), Some("Y"));
        assert_eq!(n.describe(3), "reason_3");
        assert_eq!(EnumNames::from_btf(&blob(), "nope", "").unwrap(), None);
    }

    #[test]
    fn truncated_or_foreign_input_is_an_error() {
        let b = blob();
        for cut in [0, 10, 30, b.len() - 3] {
            assert!(
                EnumNames::from_btf(&b[..cut], "e", "").is_err(),
                "cut {cut}"
            );
        }
        let mut bad = b.clone();
        bad[0] = 0;
        assert!(EnumNames::from_btf(&bad, "e", "").is_err());
    }

    #[test]
    fn reads_this_kernels_drop_reasons() {
        let Ok(b) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("SKIP: no /sys/kernel/btf/vmlinux");
            return;
        };
        let r = Reasons::from_btf(&b).unwrap();
        let qdisc = (0..1024).find(|&v| r.drop.get(v) == Some("QDISC_DROP"));
        assert!(qdisc.is_some(), "QDISC_DROP among the drop reasons");
        assert_eq!(r.drop.get(2), Some("NOT_SPECIFIED"));
    }
}
