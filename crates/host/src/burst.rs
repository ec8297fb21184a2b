//! Microburst sampler of interface counters.
