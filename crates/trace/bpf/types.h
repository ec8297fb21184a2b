/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The kernel types trace.bpf.c reads, reduced to the fields it uses.
 *
 * Every struct is marked preserve_access_index, so each field access compiles to a CO-RE
 * relocation that the loader resolves against the running kernel's BTF
 * (/sys/kernel/btf/vmlinux) by field name: the offsets below are placeholders, not a claim
 * about any kernel's layout. This file replaces a full vmlinux.h so that the compiled object
 * depends only on these names, and rebuilds give the same bytes on any machine.
 *
 * Bitfields keep the kernel's declared widths: their position is relocated too
 * (BPF_CORE_READ_BITFIELD).
 */
#ifndef TCPDOCTOR_TYPES_H
#define TCPDOCTOR_TYPES_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* bpf_helpers.h uses these map-definition constants (include/uapi/linux/bpf.h). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_ANY = 0,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct ns_common {
	unsigned int inum;
};

struct net {
	struct ns_common ns;
};

typedef struct {
	struct net *net;
} possible_net_t;

struct in6_addr {
	union {
		__u8 u6_addr8[16];
		__be32 u6_addr32[4];
	} in6_u;
};

struct sock_common {
	union {
		__u64 skc_addrpair;
		struct {
			__be32 skc_daddr;
			__be32 skc_rcv_saddr;
		};
	};
	union {
		__u32 skc_portpair;
		struct {
			__be16 skc_dport;
			__u16 skc_num;
		};
	};
	unsigned short skc_family;
	volatile unsigned char skc_state;
	possible_net_t skc_net;
	unsigned long skc_flags;	/* sk_flags: enum sock_flags bits (SOCK_DONE: the peer's FIN came) */
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
};

struct inode {
	unsigned long i_ino;
};

/* The process a thread belongs to is named by its thread-group leader's comm (what ps and
 * ss -p show); a thread's own comm may be a worker's name. */
struct task_struct {
	struct task_struct *group_leader;
	char comm[16];
};

struct file {
	struct inode *f_inode;
};

struct socket {
	struct file *file;
};

struct sock {
	struct sock_common __sk_common;
	struct socket *sk_socket;
	int sk_err;
	u16 sk_protocol;
	u32 sk_ack_backlog;
	u32 sk_max_ack_backlog;
};

struct inet_sock {
	__be16 inet_sport;
};

struct inet_connection_sock {
	struct inet_sock icsk_inet;
	__u8 icsk_ca_state: 5;
	__u8 icsk_ca_initialized: 1;
	__u8 icsk_ca_setsockopt: 1;
	__u8 icsk_ca_dst_locked: 1;
	__u8 icsk_retransmits;
	__u8 icsk_pending;
	__u8 icsk_probes_out;
};

struct tcp_options_received {
	u16 saw_tstamp: 1;
	u16 tstamp_ok: 1;
	u16 dsack: 1;
	u16 wscale_ok: 1;
	u16 sack_ok: 3;
	u16 smc_ok: 1;
	u16 snd_wscale: 4;
	u16 rcv_wscale: 4;
};

struct tcp_sock {
	struct inet_connection_sock inet_conn;
	u32 rcv_nxt;
	u32 rcv_wup;
	u32 rcv_wnd;
	u32 snd_wnd;
	u32 packets_out;
	u32 segs_out;
	u32 snd_una;
	u32 write_seq;	/* the sequence number after the last byte queued (and after a FIN) */
	u64 delivered_mstamp;
	u64 bytes_received;	/* payload bytes received (RFC 4898 tcpEStatsAppHCThruOctetsReceived) */
	u64 bytes_acked;	/* payload bytes the peer acknowledged (RFC 4898 tcpEStatsAppHCThruOctetsAcked) */
	struct tcp_options_received rx_opt;
};

struct request_sock {
	struct sock_common __req_common;
	u8 num_retrans;
};

/* A socket that closed first lives on as this mini-socket: in TIME_WAIT, or, orphaned in
 * FIN_WAIT2, waiting for the peer's FIN (tcp_time_wait(sk, TCP_FIN_WAIT2, ...)); its
 * sk_state reads TIME_WAIT either way, tw_substate tells which (sock_diag reports it). */
struct inet_timewait_sock {
	struct sock_common __tw_common;
	unsigned char tw_substate;
};

struct net_device {
	char name[16];
	int ifindex;
	possible_net_t nd_net;
};

struct sk_buff {
	struct net_device *dev;
	unsigned char *data;
	struct sock *sk;
	unsigned int len;
	__be16 protocol;
	__u16 transport_header;
	__u16 network_header;
	unsigned char *head;
};

/* Only for the existence of the field: the tcp_retransmit_skb tracepoint passes the
 * resend's result as its third argument when its record has `err` (6.18 here). */
struct trace_event_raw_tcp_retransmit_skb {
	int err;
};

#pragma clang attribute pop

/* Wire formats and socket addresses: fixed by the ABI, read as laid out here. */
struct sockaddr_in {
	unsigned short sin_family;
	__be16 sin_port;
	__be32 sin_addr;
	unsigned char sin_zero[8];
};

struct sockaddr_in6 {
	unsigned short sin6_family;
	__be16 sin6_port;
	__be32 sin6_flowinfo;
	struct in6_addr sin6_addr;
	__u32 sin6_scope_id;
};

struct sockaddr {
	unsigned short sa_family;
	char sa_data[14];
};

struct iphdr {
	__u8 ihl_version; /* ihl: low nibble, version: high nibble (little-endian bitfield order) */
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__be32 saddr;
	__be32 daddr;
};

struct ipv6hdr {
	__u8 priority_version;
	__u8 flow_lbl[3];
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	struct in6_addr saddr;
	struct in6_addr daddr;
};

struct tcphdr {
	__be16 source;
	__be16 dest;
	__be32 seq;
	__be32 ack_seq;
	__u8 doff_res; /* data offset: high nibble */
	__u8 flags;    /* FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10 */
	__be16 window;
	__u16 check;
	__u16 urg_ptr;
};

#endif
