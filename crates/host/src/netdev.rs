//! Interface statistics (sysfs, netlink) and link speed.
