//! Meanings of the kernel TCP counters tcpdoctor reports, and the pathology each signals.
