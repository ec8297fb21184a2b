//! [`SeqNumber`]: a TCP sequence number whose comparisons handle wrap-around (RFC 9293
//! section 3.4: sequence space arithmetic is modulo 2^32).

use std::cmp::Ordering;
use std::fmt;

/// A 32-bit TCP sequence number. `a < b` means `b` is ahead of `a` by less than 2^31.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// `self + n`, wrapping.
    pub fn wrapping_add(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(n))
    }

    /// `self - n`, wrapping.
    pub fn wrapping_sub(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(n))
    }

    /// Signed distance `self - other` in sequence space.
    pub fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

impl PartialOrd for SeqNumber {
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_survives_wrap_around() {
        let a = SeqNumber(u32::MAX - 10);
        let b = a.wrapping_add(20);
        assert_eq!(b.0, 9);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b.diff(a), 20);
        assert_eq!(a.diff(b), -20);
        assert_eq!(b.wrapping_sub(20), a);
        assert!(SeqNumber(5) <= SeqNumber(5));
        // Half the space ahead counts as behind.
        assert!(SeqNumber(0) > SeqNumber(0x8000_0001));
    }
}
