//! [`Dense`]: a map for the few keys that many segments look up (receivers, services, client
//! to server pairs), in first-seen order behind a hash index.

use std::hash::Hash;

use super::FastMap;

/// A map for keys that few in number but looked up on many segments (receivers, client to
/// server pairs): values live in a dense list in first-seen order behind a hash index, and the
/// last key looked up is remembered, so a run of lookups of one key (one server taking
/// thousands of connections) skips the hash.
pub struct Dense<K, V> {
    index: FastMap<K, u32>,
    items: Vec<(K, V)>,
    last: Option<(K, u32)>,
    epoch: u32,
}

impl<K, V> Default for Dense<K, V> {
    fn default() -> Self {
        Dense {
            index: FastMap::default(),
            items: Vec::new(),
            last: None,
            epoch: 1,
        }
    }
}

impl<K: Hash + Eq + Copy, V> Dense<K, V> {
    /// The value of `k`, made by `make` when `k` is new.
    pub fn get_or_insert_with(&mut self, k: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.last {
            Some((lk, i)) if lk == k => i,
            _ => {
                let items = &mut self.items;
                let i = *self.index.entry(k).or_insert_with(|| {
                    items.push((k, make()));
                    (items.len() - 1) as u32
                });
                self.last = Some((k, i));
                i
            }
        };
        &mut self.items[i as usize].1
    }

    /// The position of `k` in the list (for [`at_mut`](Self::at_mut)), adding it when new.
    pub fn index_or_insert_with(&mut self, k: K, make: impl FnOnce() -> V) -> u32 {
        self.get_or_insert_with(k, make);
        self.last.expect("set by the lookup").1
    }

    /// The value at a position [`index_or_insert_with`](Self::index_or_insert_with) gave.
    pub fn at_mut(&mut self, i: u32) -> &mut V {
        &mut self.items[i as usize].1
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        let i = self.position(k)?;
        Some(&self.items[i as usize].1)
    }

    /// Where `k` is in the list: the last key looked up without the hash.
    #[inline]
    fn position(&self, k: &K) -> Option<u32> {
        match self.last {
            Some((lk, i)) if lk == *k => Some(i),
            _ => self.index.get(k).copied(),
        }
    }

    /// Entries in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.items.iter().map(|(k, v)| (k, v))
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.items.iter_mut().map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let i = self.position(k)?;
        Some(&mut self.items[i as usize].1)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Keeps the entries `keep` says yes to (in their order); positions change, so
    /// [`epoch`](Self::epoch) moves on.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) {
        self.items.retain(|(k, v)| keep(k, v));
        self.index.clear();
        for (i, (k, _)) in self.items.iter().enumerate() {
            self.index.insert(*k, i as u32);
        }
        self.last = None;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Changes each time positions handed out before become invalid.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
}
