//! Routes and per-route TCP metrics (rto_min).
