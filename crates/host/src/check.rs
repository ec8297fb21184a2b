//! Audit of TCP sysctls and routes into findings, with the arithmetic.
