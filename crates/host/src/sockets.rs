//! TCP socket census through NETLINK_SOCK_DIAG.
