// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * tcpdoctor trace: the kernel half. Only tracepoints, attached by BTF (tp_btf): no tracefs,
 * no kernel headers, no kprobes and no fentry/fexit (kernels built without kprobes, or
 * whose security policy refuses trampolines, still run it), only /sys/kernel/btf/vmlinux.
 *
 * What it must do: count every TCP event it sees, exactly (per-CPU counters, also when the
 * ring buffer is full), and send user space one record per event worth attributing, with the
 * socket's 4-tuple, network namespace, owning process and the kernel's own evidence (state,
 * retransmission count, drop reason). What it must not do: anything per packet beyond a
 * namespace check, or any record for a healthy connection: a connect that completes without
 * a retransmission and a normal close cost a few map operations and no record, so tracing
 * can stay on under connection churn.
 *
 * State kept here (user space never writes it):
 *   owners:  socket -> the process that called connect() on it, when, and what happened to
 *            it since (retransmitted SYN, stale ACK reset); cleared when the socket closes.
 *   history: (netns, 4-tuple) -> how the last active-open connection on that 4-tuple ended
 *            (reset, passive close leaving TIME_WAIT at the peer, ...), so that a SYN answered
 *            by an old ACK can be told apart: a race with a reset vs a TIME_WAIT collision;
 *            and who owned it, so user space can name the process behind a TIME_WAIT socket
 *            (read by src/history.rs, which computes tuple_slot() the same way).
 *
 * Both are direct-mapped arrays of slots, not hash maps: a connect and a close each cost one
 * slot write. Measured under loopback churn (bench/trace): hash map updates and deletes were
 * most of the trace's cost, and per connection the programs went from about 3.6 us to 2.4 us.
 *
 * Rebuild with build.sh (pinned flags); the committed trace.bpf.o must match it.
 */
#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before load: 1 = only sockets/packets of namespaces in netns_filter. */
volatile const __u32 filter_netns = 0;
/* The one traced namespace when there is exactly one (the usual --netns case): compared
 * directly, without a hash map lookup per event. 0: use netns_filter. */
volatile const __u32 filter_netns_one = 0;
/* Set by the loader: 1 = report every connection's lifetime at its close (K_CLOSED, `trace
 * --connections`). 0 leaves the code below unreachable, and the verifier removes it. */
volatile const __u32 track_connections = 0;

/* TCP states (include/net/tcp_states.h). */
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_FIN_WAIT1 4
#define TCP_FIN_WAIT2 5
#define TCP_TIME_WAIT 6
#define TCP_CLOSE 7
#define TCP_CLOSE_WAIT 8
#define TCP_LAST_ACK 9
#define TCP_LISTEN 10
#define TCP_CLOSING 11

/* Congestion-avoidance states (include/net/tcp.h, enum tcp_ca_state). */
#define TCP_CA_RECOVERY 3
#define TCP_CA_LOSS 4

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD

/* enum tcp_tw_status (include/net/tcp.h). */
#define TCP_TW_ACK 2
#define TCP_TW_SYN 3

#define EADDRNOTAVAIL 99

/* icsk_pending values (include/net/inet_connection_sock.h). */
#define ICSK_TIME_LOSS_PROBE 5

/* Record kinds: the Rust side (src/raw.rs) mirrors these numbers. */
enum kind {
	K_RETRANS = 1,		/* a = retransmit class, b = icsk_retransmits, c = us since data was last delivered */
	K_SYNACK_RETRANS = 2,	/* a = num_retrans of the request */
	K_RST_SENT = 3,		/* a = sk_rst_reason, b = history how, c = history age ms */
	K_RST_RECV = 4,
	K_CONNECTED = 5,	/* a connect that needed SYN retransmissions completed */
	K_CONNECT_FAILED = 6,	/* SYN_SENT -> CLOSE: a = owner flags, b = us since connect, c = sk_err */
	K_CONNECT_ERR = 7,	/* connect() failed before sending a SYN: a = errno; sport is the port
				 * bound before connect(), 0 when connect() was to choose one */
	K_DROP = 8,		/* a = skb_drop_reason, b = ifindex, c = tcp flags | tw_substate << 8 */
	K_ZERO_WINDOW = 9,	/* the peer of this socket advertised a zero window */
	K_WINDOW_PROBE = 10,	/* this socket, its window zero, received a zero-window probe */
	K_TW_ACK = 11,		/* a timewait socket did not accept a SYN: a = drop reason,
				 * b = its tw_substate (TIME_WAIT, or FIN_WAIT2), c = tcp flags */
	K_CLOSED = 12,		/* a connection's full socket closed (track_connections): a = CL_*
				 * flags, b = enum how, c = sk_err; bytes_acked, bytes_received and
				 * born_ns as read at the close; state = the state it closed from */
};

/* K_CLOSED a: what the kernel's byte counts include besides payload (measured with ss -ti:
 * an active open's bytes_acked counts its SYN, 1, once established, and its FIN once acked;
 * bytes_received counts the peer's FIN once received). */
#define CL_ACTIVE 1		/* opened by connect() here */
#define CL_FIN_ACKED 2		/* this end's FIN was acknowledged */
#define CL_FIN_RECEIVED 4	/* the peer's FIN was received (SOCK_DONE) */

/* Retransmission classes (K_RETRANS a). */
enum retrans_class {
	R_SYN = 1,
	R_RTO = 2,	/* sent by the retransmission timer */
	R_TLP = 3,	/* sent by a tail-loss probe */
	R_FAST = 4,	/* fast retransmit / SACK recovery */
	R_LOSS = 5,	/* go-back-N after a timeout (CA_Loss), triggered by ACKs */
	R_OTHER = 6,
	R_ZERO_WINDOW = 7, /* the timer resent into a zero window: not counted as a timeout */
};

/* How the last connection on a 4-tuple ended (history). */
enum how {
	H_RESET = 1,	/* this end sent a reset (SO_LINGER 0, abort) */
	H_PASSIVE = 2,	/* the peer closed first: the peer holds TIME_WAIT */
	H_ACTIVE = 3,	/* this end closed first: this end holds TIME_WAIT */
	H_FAILED = 4,	/* the connect never completed */
	H_OTHER = 5,
};

/* Per-CPU counters, read and summed by user space (src/raw.rs Counter). */
enum counter {
	C_LOST = 0,
	C_CONNECT = 1,
	C_CONNECTED = 2,
	C_CONNECT_ERR = 3,
	C_EADDRNOTAVAIL = 4,
	C_R_SYN = 5,
	C_R_RTO = 6,
	C_R_TLP = 7,
	C_R_FAST = 8,
	C_R_LOSS = 9,
	C_R_OTHER = 10,
	C_SYNACK_RETRANS = 11,
	C_RST_SENT = 12,
	C_RST_RECV = 13,
	C_DROP_TCP = 14,
	C_ZERO_WINDOW = 15,
	C_WINDOW_PROBE = 16,
	C_TW_ACK = 17,
	C_R_UNSENT = 18,	/* resends of any class that sent nothing (tracepoint's err != 0) */
	C_CONNECT_FAILED = 19,	/* SYN_SENT -> CLOSE after the SYN, with an error (refused, timed out) */
	C_EVENTS = 20,
	C_ACCEPTED = 21,
	C_CLOSED = 22,
	C_STALE_ACK = 23,
	C_R_ZERO_WINDOW = 24,
	C_DROP_BENIGN = 25,	/* buffers freed for a quiet reason (QUEUE_PURGE): not in C_DROP_TCP */
	C_MAX = 32,
};

#define DROP_REASONS 1024

/* Owner flags. */
#define O_SYN_RETRANS 1
#define O_STALE_ACK 2
#define O_RESET_SENT 4
#define O_PASSIVE 8	/* accepted here (track_connections only): tgid/comm of its closer, 0 until known */

struct event {
	__u64 ts_ns;
	__u64 sk;
	__u32 netns;
	__u32 pid;	/* tgid of the owner (connect caller) or of the current task */
	__u32 ino;	/* socket inode, 0 when unknown */
	__u16 kind;
	__u8 family;
	__u8 state;
	__u16 sport;	/* host order */
	__u16 dport;
	__u32 a;
	__u32 b;
	__u32 c;
	__u8 owner;	/* 1: pid/comm from the connect() owner; 2: from the current task */
	__u8 silent;	/* retransmission: the peer acknowledged no data and sent none */
	__s16 err;	/* retransmission: the kernel's result, -errno when nothing was sent */
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[16];
	char ifname[16];
	__u64 bytes_acked;	/* K_CLOSED: tcp_sock.bytes_acked at the close */
	__u64 bytes_received;	/* K_CLOSED: tcp_sock.bytes_received at the close */
	__u64 born_ns;		/* K_CLOSED: connect() (active) or the handshake's end (passive) */
};
_Static_assert(sizeof(struct event) == 144, "struct event is mirrored by src/raw.rs");

struct owner {
	__u64 start_ns;
	__u32 tgid;
	__u32 flags;
	char comm[16];
};

struct tuple {
	__u32 netns;
	__u16 sport;
	__u16 dport;
	__u8 family;
	__u8 pad[3];
	__u8 saddr[16];
	__u8 daddr[16];
};

/* The last connection on a 4-tuple: when and how it closed, and the process that had
 * called connect() on it (user space reads tgid and comm for TIME_WAIT sockets: `sockets
 * --watch` names the process that closed them, also after it exited). */
struct hist {
	__u64 close_ns;
	__u32 how;
	__u32 tgid;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DROP_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} drop_reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} netns_filter SEC(".maps");

/* Drop reasons counted but not sent as records (user space fills it from the kernel's
 * names: e.g. QUEUE_PURGE, a closing socket freeing its own queues). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DROP_REASONS);
	__type(key, __u32);
	__type(value, __u32);
} quiet_reasons SEC(".maps");

/* owners is direct-mapped by socket address, like history (see there): a connect costs one
 * slot write, not a hash map update. A socket whose slot a later connect took has no known
 * owner any more (its records say so); it is never given another socket's owner. */
#define OWNER_SLOTS (1 << 16)

struct owner_slot {
	__u64 seq;
	__u64 sk;
	struct owner o;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OWNER_SLOTS);
	__type(key, __u32);
	__type(value, struct owner_slot);
} owners SEC(".maps");

/* Sequence-word protocol shared by the owner and history slots: odd while a writer holds
 * the slot; a second writer gives up; a reader that sees the word odd or moving treats the
 * slot as empty, so a torn entry is never read. */
/* A reader's load of a sequence word. The JIT emits plain loads in program order, and x86-64
 * does not reorder loads with other loads (TSO), so no locked instruction is needed; the
 * compiler barriers keep the slot's loads between the two reads of the word. Other
 * architectures would need an acquire load here. */
#define READ_SEQ(p)                                             \
	({                                                      \
		__u64 __v;                                      \
		asm volatile("" ::: "memory");                  \
		__v = *(volatile __u64 *)(p);                   \
		asm volatile("" ::: "memory");                  \
		__v;                                            \
	})

static __always_inline bool slot_lock(__u64 *seq)
{
	__u64 v = *seq;
	if (v & 1)
		return false;
	return __sync_val_compare_and_swap(seq, v, v + 1) == v;
}

static __always_inline void slot_unlock(__u64 *seq)
{
	__sync_fetch_and_add(seq, 1);
}

/* One per-CPU word: the socket's address, as a number. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} scratch SEC(".maps");

/* The socket's address as a number: the verifier forbids arithmetic on a socket pointer;
 * read back from a map value, it is a plain scalar. The word is shared by every program on
 * the CPU, and another one, run by an interrupt's softirq between this write and read, would
 * leave its own socket there (and this socket's owner would be filed under that one): so the
 * address is written and read twice, and kept only when both reads agree (a helper that
 * copies it from the stack instead cost 10% more per run, bpf_stats). 0 when unavailable. */
static __always_inline __u64 sk_id(const struct sock *sk)
{
	__u32 zero = 0;
	volatile __u64 *p = bpf_map_lookup_elem(&scratch, &zero);
	if (!p)
		return 0;
	for (int i = 0; i < 3; i++) {
		*p = (__u64)sk;
		__u64 first = *p;
		*p = (__u64)sk;
		if (*p == first)
			return first;
	}
	return 0;
}

static __always_inline struct owner_slot *owner_slot_of(__u64 id)
{
	__u32 idx = (__u32)(((id >> 6) * 0x9e3779b97f4a7c15ULL) >> 48) & (OWNER_SLOTS - 1);
	return bpf_map_lookup_elem(&owners, &idx);
}

/* The owner entry of a socket, copied into *out: its connect() caller, or for an accepted
 * socket (O_PASSIVE, track_connections only) when it was accepted and who closed it; NULL
 * when none. */
static __always_inline struct owner *owner_get_any(const struct sock *sk, struct owner *out)
{
	__u64 id = sk_id(sk);
	struct owner_slot *s = id ? owner_slot_of(id) : 0;
	if (!s)
		return 0;
	__u64 v = READ_SEQ(&s->seq);
	if (v & 1)
		return 0;
	__u64 who = s->sk;
	*out = s->o;
	if (READ_SEQ(&s->seq) != v || who != id)
		return 0;
	return out;
}

/* The connect() owner of a socket, copied into *out; NULL when unknown (or accepted). */
static __always_inline struct owner *owner_get(const struct sock *sk, struct owner *out)
{
	struct owner *o = owner_get_any(sk, out);
	if (o && (o->flags & O_PASSIVE))
		return 0;
	return o;
}

static __always_inline void owner_put(const struct sock *sk, const struct owner *o)
{
	__u64 id = sk_id(sk);
	struct owner_slot *s = owner_slot_of(id);
	if (!s || !slot_lock(&s->seq))
		return;
	s->sk = id;
	s->o = *o;
	slot_unlock(&s->seq);
}

static __always_inline void owner_flag(const struct sock *sk, __u32 flags)
{
	__u64 id = sk_id(sk);
	struct owner_slot *s = owner_slot_of(id);
	if (!s || !slot_lock(&s->seq))
		return;
	if (s->sk == id)
		s->o.flags |= flags;
	slot_unlock(&s->seq);
}

static __always_inline void owner_clear(const struct sock *sk)
{
	__u64 id = sk_id(sk);
	struct owner_slot *s = owner_slot_of(id);
	if (!s || !slot_lock(&s->seq))
		return;
	if (s->sk == id)
		s->sk = 0;
	slot_unlock(&s->seq);
}

/* history is a direct-mapped table, not a hash map: a close costs one array slot write
 * (measured: an LRU hash update and delete per connection was the largest part of the
 * trace's cost under churn). A newer 4-tuple hashing to the same slot replaces the older
 * one, as an LRU would evict it. Each slot has a sequence word: odd while a writer holds it
 * (a second writer gives up: its entry is not remembered), and a reader that sees it move
 * or odd treats the slot as empty; so a torn entry is never read. */
#define HIST_SLOTS (1 << 17)

struct hist_slot {
	__u64 seq;
	struct tuple t;
	struct hist h;
};
_Static_assert(sizeof(struct hist_slot) == 88, "struct hist_slot is mirrored by src/history.rs");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HIST_SLOTS);
	__type(key, __u32);
	__type(value, struct hist_slot);
} history SEC(".maps");

/* A counter only one program counts: the kernel never runs a program nested in itself on
 * one CPU, so a plain add is exact. */
static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &idx);
	if (v)
		*v += 1;
}

/* A counter every program counts (records, lost records): another program, run on the same
 * CPU by an interrupt's softirq while this one runs, may count it between a load and a store,
 * so the add is atomic (it is paid once per record, not per event). */
static __always_inline void count_shared(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &idx);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline __u32 sk_netns(const struct sock *sk)
{
	return sk->__sk_common.skc_net.net->ns.inum;
}

static __always_inline bool netns_ok(__u32 ns)
{
	if (!filter_netns)
		return true;
	if (filter_netns_one)
		return ns == filter_netns_one;
	return bpf_map_lookup_elem(&netns_filter, &ns) != 0;
}

static __always_inline bool is_tcp(const struct sock *sk)
{
	return sk->sk_protocol == IPPROTO_TCP;
}

/* The verifier bounds direct reads by the argument's declared type (struct sock): reach the
 * TCP fields through the checked cast, which is NULL for a socket that is not TCP. */
static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return bpf_skc_to_tcp_sock((void *)sk);
}

static __always_inline __u32 sk_ino(const struct sock *sk)
{
	struct socket *sock = sk->sk_socket;
	if (!sock)
		return 0;
	struct file *f = sock->file;
	if (!f)
		return 0;
	return (__u32)f->f_inode->i_ino;
}

/* Fills the 4-tuple of a full, request or TIME_WAIT socket (all start with sock_common). */
static __always_inline void fill_common(struct event *e, const struct sock_common *c)
{
	e->family = c->skc_family;
	e->sport = c->skc_num;
	e->dport = __builtin_bswap16(c->skc_dport);
	if (e->family == AF_INET) {
		__be32 s = c->skc_rcv_saddr, d = c->skc_daddr;
		__builtin_memcpy(e->saddr, &s, 4);
		__builtin_memcpy(e->daddr, &d, 4);
	} else {
		struct in6_addr s = c->skc_v6_rcv_saddr, d = c->skc_v6_daddr;
		__builtin_memcpy(e->saddr, &s, 16);
		__builtin_memcpy(e->daddr, &d, 16);
	}
}

static __always_inline void tuple_of(struct tuple *t, const struct sock *sk, __u32 ns)
{
	const struct sock_common *c = &sk->__sk_common;
	__builtin_memset(t, 0, sizeof(*t));
	t->netns = ns;
	t->family = c->skc_family;
	/* inet_sport, not skc_num: a socket moving to CLOSE has already released its port
	 * (inet_put_port zeroes skc_num before the state tracepoint fires) but keeps
	 * inet_sport until tcp_disconnect finishes, which is when its reset goes out. */
	struct tcp_sock *tp = tcp_sk(sk);
	t->sport = tp ? __builtin_bswap16(tp->inet_conn.icsk_inet.inet_sport) : c->skc_num;
	t->dport = __builtin_bswap16(c->skc_dport);
	if (t->family == AF_INET) {
		__be32 s = c->skc_rcv_saddr, d = c->skc_daddr;
		__builtin_memcpy(t->saddr, &s, 4);
		__builtin_memcpy(t->daddr, &d, 4);
	} else {
		struct in6_addr s = c->skc_v6_rcv_saddr, d = c->skc_v6_daddr;
		__builtin_memcpy(t->saddr, &s, 16);
		__builtin_memcpy(t->daddr, &d, 16);
	}
}

/* Reserves a record; counts it lost when the ring buffer is full. */
static __always_inline struct event *reserve(__u16 kind, __u32 ns)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(struct event), 0);
	if (!e) {
		count_shared(C_LOST);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->kind = kind;
	e->netns = ns;
	return e;
}

static __always_inline void submit(struct event *e)
{
	count_shared(C_EVENTS);
	/* No wake-up: user space drains the buffer on its own clock (every few ms), so a burst
	 * of records costs no scheduler work. */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* The current process: its id (tgid) and name. The name is the thread-group leader's comm,
 * as ps and ss -p show it: bpf_get_current_comm would give the calling thread's own name,
 * and a process whose threads are named differently (workers, runtimes) would appear under
 * several names with one pid. Two direct loads through the task's BTF pointer, no copy
 * helper. */
static __always_inline __u32 current_process(char comm[16])
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_struct *leader = t->group_leader;
	__u64 *dst = (__u64 *)comm;
	const __u64 *src = (const __u64 *)leader->comm;
	dst[0] = src[0];
	dst[1] = src[1];
	return bpf_get_current_pid_tgid() >> 32;
}

/* Owner of the socket: the connect() caller when known, else the current task. */
static __always_inline void fill_owner(struct event *e, const struct sock *sk, bool current_ok)
{
	struct owner copy;
	struct owner *o = owner_get(sk, &copy);
	if (o) {
		e->pid = o->tgid;
		__builtin_memcpy(e->comm, o->comm, 16);
		e->owner = 1;
	} else if (current_ok) {
		e->pid = current_process(e->comm);
		e->owner = 2;
	}
}

static __always_inline void fill_sock(struct event *e, const struct sock *sk)
{
	e->sk = (__u64)sk;
	e->state = sk->__sk_common.skc_state;
	fill_common(e, &sk->__sk_common);
	struct tcp_sock *tp = tcp_sk(sk);
	if (tp)
		e->sport = __builtin_bswap16(tp->inet_conn.icsk_inet.inet_sport);
	e->ino = sk_ino(sk);
}

/* ---- history slots ------------------------------------------------------------------ */

static __always_inline __u32 tuple_slot(const struct tuple *t)
{
	const __u32 *w = (const __u32 *)t;
	__u32 h = 0x9e3779b9;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(*t) / 4); i++) {
		h ^= w[i];
		h *= 0x85ebca6b;
		h ^= h >> 15;
	}
	return h & (HIST_SLOTS - 1);
}

static __always_inline bool tuple_eq(const struct tuple *a, const struct tuple *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	__u64 d = 0;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(*a) / 8); i++)
		d |= x[i] ^ y[i];
	/* The last 4 bytes (44 = 5 * 8 + 4): the end of an IPv6 destination address. */
	_Static_assert(sizeof(*a) == 44, "struct tuple is mirrored by src/history.rs");
	d |= ((const __u32 *)a)[10] ^ ((const __u32 *)b)[10];
	return d == 0;
}

/* Takes the slot for writing, or returns NULL when another writer holds it. */
static __always_inline struct hist_slot *hist_lock(__u32 idx, __u64 *seq)
{
	struct hist_slot *s = bpf_map_lookup_elem(&history, &idx);
	if (!s)
		return 0;
	if (!slot_lock(&s->seq))
		return 0;
	*seq = s->seq;
	return s;
}

static __always_inline void hist_unlock(struct hist_slot *s)
{
	slot_unlock(&s->seq);
}

static __always_inline void hist_put(const struct tuple *t, const struct hist *h)
{
	__u64 seq;
	struct hist_slot *s = hist_lock(tuple_slot(t), &seq);
	if (!s)
		return;
	s->t = *t;
	s->h = *h;
	hist_unlock(s);
}

/* Copies the entry of this 4-tuple into *out; false when there is none (or it was being
 * written). */
static __always_inline bool hist_get(const struct tuple *t, struct hist *out)
{
	__u32 idx = tuple_slot(t);
	struct hist_slot *s = bpf_map_lookup_elem(&history, &idx);
	if (!s)
		return false;
	__u64 v = READ_SEQ(&s->seq);
	if (v & 1)
		return false;
	struct tuple seen = s->t;
	*out = s->h;
	if (READ_SEQ(&s->seq) != v)
		return false;
	return tuple_eq(&seen, t);
}

/* Marks the entry of this 4-tuple as ended by a reset, if it closed less than 1 s ago. */
static __always_inline void hist_mark_reset(const struct tuple *t)
{
	__u64 seq;
	struct hist_slot *s = hist_lock(tuple_slot(t), &seq);
	if (!s)
		return;
	if (tuple_eq(&s->t, t) && bpf_ktime_get_ns() - s->h.close_ns < 1000000000ULL)
		s->h.how = H_RESET;
	hist_unlock(s);
}

/* ---- retransmissions ---------------------------------------------------------------- */

SEC("tp_btf/tcp_retransmit_skb")
int tcp_retransmit_skb(__u64 *ctx)
{
	const struct sock *sk = (const struct sock *)ctx[0];
	__u32 ns = sk_netns(sk);
	if (!netns_ok(ns))
		return 0;
	struct tcp_sock *tp = tcp_sk(sk);
	if (!tp)
		return 0;
	const struct inet_connection_sock *icsk = &tp->inet_conn;
	__u8 state = sk->__sk_common.skc_state;
	__u32 class;
	if (state == TCP_SYN_SENT || state == TCP_SYN_RECV) {
		class = R_SYN;
	} else {
		/* What sent it, from the socket's state (net/ipv4/tcp_timer.c,
		 * tcp_write_timer_handler): the retransmission timer clears icsk_pending before
		 * tcp_retransmit_timer enters CA_Loss and resends the head; later resends of that
		 * window come from ACKs with the timer armed again. A tail-loss probe runs with
		 * icsk_pending still ICSK_TIME_LOSS_PROBE, in Open or Disorder (tcp_schedule_loss_probe);
		 * fast retransmit is CA_Recovery (RFC 6675). */
		__u8 ca = BPF_CORE_READ_BITFIELD(icsk, icsk_ca_state);
		__u8 pending = icsk->icsk_pending;
		if (ca == TCP_CA_LOSS && pending == 0)
			/* With the peer's window at zero the timer resends as a probe and the
			 * kernel does not count a timeout (tcp_retransmit_timer). */
			class = tp->snd_wnd == 0 ? R_ZERO_WINDOW : R_RTO;
		else if (ca == TCP_CA_LOSS)
			class = R_LOSS;
		else if (ca == TCP_CA_RECOVERY)
			class = R_FAST;
		else if (pending == ICSK_TIME_LOSS_PROBE)
			class = R_TLP;
		else
			class = R_OTHER;
	}
	count(class == R_ZERO_WINDOW ? C_R_ZERO_WINDOW : C_R_SYN + class - R_SYN);
	/* Where the tracepoint passes the result (a third argument), it also fires for a resend
	 * that sent nothing (__tcp_retransmit_skb): -EBUSY while the first copy is still in this
	 * host's qdisc or driver, or a local error. The attempt is counted in its class (for a
	 * timeout, the timer did fire: TcpExtTCPTimeouts counts it) and here. */
	int err = 0;
	if (bpf_core_field_exists(((struct trace_event_raw_tcp_retransmit_skb *)0)->err))
		err = (int)ctx[2];
	if (err)
		count(C_R_UNSENT);
	if (class == R_SYN) {
		owner_flag(sk, O_SYN_RETRANS);
	}
	struct event *e = reserve(K_RETRANS, ns);
	if (!e)
		return 0;
	fill_sock(e, sk);
	fill_owner(e, sk, false);
	e->a = class;
	e->b = icsk->icsk_retransmits;
	e->err = (__s16)err;
	if (class == R_SYN && state == TCP_SYN_SENT) {
		/* How long since connect() (its owner record; 0: not seen). The ladder's first
		 * resend waits the initial RTO (1 s); one within milliseconds followed an ACK the
		 * SYN_SENT socket could not accept (tcp_rcv_synsent_state_process re-arms the timer
		 * at TCP_TIMEOUT_MIN), whether or not that ACK was traced. */
		struct owner copy;
		struct owner *o = owner_get(sk, &copy);
		if (o && o->start_ns && e->ts_ns > o->start_ns) {
			__u64 us = (e->ts_ns - o->start_ns) / 1000;
			e->c = us > 0xffffffff ? 0xffffffff : (us ? (__u32)us : 1);
		}
	}
	if (class == R_RTO) {
		/* How long the flow has waited: since an ACK last delivered data
		 * (tcp_sock.delivered_mstamp, tcp_clock_us: the same clock as ktime_get_ns). */
		__u64 since = tp->delivered_mstamp;
		__u64 now_us = e->ts_ns / 1000;
		if (since && now_us > since)
			e->c = now_us - since > 0xffffffff ? 0xffffffff : (__u32)(now_us - since);
		/* The peer never acknowledged data of this connection nor sent any since its
		 * SYN-ACK: it may never have taken the connection (a full accept queue drops the
		 * handshake's last ACK), which is not a loss among flows into a busy receiver.
		 * bytes_acked counts the SYN of an active open (1 after the handshake, measured
		 * with ss -ti), none for a passive one. */
		e->silent = tp->bytes_acked <= 1 && tp->bytes_received == 0;
	}
	submit(e);
	return 0;
}

SEC("tp_btf/tcp_retransmit_synack")
int tcp_retransmit_synack(__u64 *ctx)
{
	const struct sock *sk = (const struct sock *)ctx[0];
	const struct request_sock *req = (const struct request_sock *)ctx[1];
	__u32 ns = sk_netns(sk);
	if (!netns_ok(ns))
		return 0;
	count(C_SYNACK_RETRANS);
	struct event *e = reserve(K_SYNACK_RETRANS, ns);
	if (!e)
		return 0;
	e->sk = (__u64)sk;
	e->state = TCP_SYN_RECV;
	fill_common(e, &req->__req_common);
	e->ino = sk_ino(sk);
	e->a = req->num_retrans;
	submit(e);
	return 0;
}

/* ---- resets ------------------------------------------------------------------------- */

/* The 4-tuple of a received segment, turned around to this host's view (local = its
 * destination). Returns the TCP flags, or -1 when the packet is not IPv4/IPv6 TCP. */
static __always_inline int fill_from_skb(struct event *e, const struct sk_buff *skb)
{
	unsigned char *head = skb->head;
	__u16 nh = skb->network_header, th_off = skb->transport_header;
	__u16 proto = __builtin_bswap16(skb->protocol);
	struct tcphdr th;
	if (proto == ETH_P_IP) {
		struct iphdr ip;
		if (bpf_probe_read_kernel(&ip, sizeof(ip), head + nh))
			return -1;
		if ((ip.ihl_version >> 4) != 4 || ip.protocol != IPPROTO_TCP)
			return -1;
		e->family = AF_INET;
		__builtin_memcpy(e->saddr, &ip.saddr, 4);
		__builtin_memcpy(e->daddr, &ip.daddr, 4);
		th_off = nh + (ip.ihl_version & 0xf) * 4;
	} else if (proto == ETH_P_IPV6) {
		struct ipv6hdr ip6;
		if (bpf_probe_read_kernel(&ip6, sizeof(ip6), head + nh))
			return -1;
		if ((ip6.priority_version >> 4) != 6 || ip6.nexthdr != IPPROTO_TCP)
			return -1;
		e->family = AF_INET6;
		__builtin_memcpy(e->saddr, &ip6.saddr, 16);
		__builtin_memcpy(e->daddr, &ip6.daddr, 16);
		th_off = nh + 40;
	} else {
		return -1;
	}
	if (bpf_probe_read_kernel(&th, sizeof(th), head + th_off))
		return -1;
	e->sport = __builtin_bswap16(th.source);
	e->dport = __builtin_bswap16(th.dest);
	return th.flags;
}

/* Swaps source and destination (a received packet seen from the receiving socket). */
static __always_inline void turn(struct event *e)
{
	__u8 tmp[16];
	__builtin_memcpy(tmp, e->saddr, 16);
	__builtin_memcpy(e->saddr, e->daddr, 16);
	__builtin_memcpy(e->daddr, tmp, 16);
	__u16 p = e->sport;
	e->sport = e->dport;
	e->dport = p;
}

SEC("tp_btf/tcp_send_reset")
int tcp_send_reset(__u64 *ctx)
{
	const struct sock *sk = (const struct sock *)ctx[0];
	const struct sk_buff *skb = (const struct sk_buff *)ctx[1];
	__u32 ns;
	if (sk) {
		ns = sk_netns(sk);
	} else if (skb && skb->dev) {
		ns = skb->dev->nd_net.net->ns.inum;
	} else {
		return 0;
	}
	if (!netns_ok(ns))
		return 0;
	count(C_RST_SENT);
	if (sk && sk->__sk_common.skc_state != TCP_SYN_SENT) {
		/* A reset closing this end's connection (SO_LINGER 0, abort): no record, only
		 * the history and owner flags learn it. */
		owner_flag(sk, O_RESET_SENT);
		/* SO_LINGER 0: tcp_disconnect moves the socket to CLOSE before it sends the
		 * reset, so the history entry written a moment ago learns it here. */
		if (sk->__sk_common.skc_state == TCP_CLOSE) {
			struct tuple t;
			tuple_of(&t, sk, ns);
			hist_mark_reset(&t);
		}
		return 0;
	}
	struct event *e = reserve(K_RST_SENT, ns);
	if (!e)
		return 0;
	e->a = (__u32)ctx[2];
	if (sk) {
		fill_sock(e, sk);
		fill_owner(e, sk, false);
		if (e->state == TCP_SYN_SENT) {
			/* A connecting socket resets an ACK that does not acknowledge its SYN: the
			 * ACK belongs to an older connection on this 4-tuple. What ended that one? */
			count(C_STALE_ACK);
			owner_flag(sk, O_STALE_ACK);
			struct tuple t;
			tuple_of(&t, sk, ns);
			struct hist last;
			struct hist *h = hist_get(&t, &last) ? &last : 0;
			if (h) {
				e->b = h->how;
				__u64 age = (e->ts_ns - h->close_ns) / 1000000;
				e->c = age > 0xffffffff ? 0xffffffff : (__u32)age;
			}
		}
	} else if (skb) {
		int flags = fill_from_skb(e, skb);
		if (flags < 0) {
			bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
			return 0;
		}
		turn(e);
		e->c = flags;
	}
	submit(e);
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int tcp_receive_reset(__u64 *ctx)
{
	const struct sock *sk = (const struct sock *)ctx[0];
	__u32 ns = sk_netns(sk);
	if (!netns_ok(ns))
		return 0;
	count(C_RST_RECV);
	/* Only a connecting socket's reset (refused) is attributed; others are counted. */
	if (sk->__sk_common.skc_state != TCP_SYN_SENT)
		return 0;
	struct event *e = reserve(K_RST_RECV, ns);
	if (!e)
		return 0;
	fill_sock(e, sk);
	fill_owner(e, sk, false);
	submit(e);
	return 0;
}

/* ---- connection lifecycle ----------------------------------------------------------- */

/* An accepted socket is being closed by its process (close() or shutdown(): process
 * context): that process is named as its owner, once. */
static __always_inline void owner_closer(const struct sock *sk)
{
	__u64 id = sk_id(sk);
	struct owner_slot *s = owner_slot_of(id);
	if (!s || s->sk != id || !(s->o.flags & O_PASSIVE) || s->o.tgid)
		return;
	if (!slot_lock(&s->seq))
		return;
	if (s->sk == id && (s->o.flags & O_PASSIVE) && !s->o.tgid)
		s->o.tgid = current_process(s->o.comm);
	slot_unlock(&s->seq);
}

/* How a connection ended, from the state it closed from and what its owner entry saw. */
static __always_inline __u32 close_how(const struct owner *o, int oldstate)
{
	if (o->flags & O_RESET_SENT)
		return H_RESET;
	if (oldstate == TCP_LAST_ACK)
		return H_PASSIVE;
	if (oldstate == TCP_FIN_WAIT1 || oldstate == TCP_FIN_WAIT2 || oldstate == TCP_CLOSING ||
	    oldstate == TCP_TIME_WAIT)
		return H_ACTIVE;
	if (oldstate == TCP_SYN_SENT)
		return H_FAILED;
	return H_OTHER;
}

/* A connection's full socket closes (track_connections): its lifetime, its bytes each way
 * and its process, one record (bcc's tcplife reads the same two counters at the same
 * tracepoint). The full socket of the side that closes first ends when its FIN is
 * acknowledged; the TIME_WAIT or FIN_WAIT2 mini-socket that lives on is not counted. */
static __always_inline void conn_closed(const struct sock *sk, __u32 ns, const struct owner *o,
					int oldstate)
{
	struct tcp_sock *tp = tcp_sk(sk);
	if (!tp)
		return;
	struct event *e = reserve(K_CLOSED, ns);
	if (!e)
		return;
	fill_sock(e, sk);
	if (o->tgid) {
		e->pid = o->tgid;
		__builtin_memcpy(e->comm, o->comm, 16);
		e->owner = (o->flags & O_PASSIVE) ? 3 : 1;
	}
	__u32 flags = (o->flags & O_PASSIVE) ? 0 : CL_ACTIVE;
	/* FIN_WAIT2 comes only once the FIN is acknowledged; from CLOSING and LAST_ACK the
	 * acknowledgement of the FIN closes it (tcp_rcv_state_process), a reset or a timeout
	 * does not: snd_una then lags write_seq, which counts the FIN. */
	if (oldstate == TCP_FIN_WAIT2 || oldstate == TCP_TIME_WAIT ||
	    ((oldstate == TCP_CLOSING || oldstate == TCP_LAST_ACK) && tp->snd_una == tp->write_seq))
		flags |= CL_FIN_ACKED;
	/* tcp_fin() sets SOCK_DONE (enum sock_flags 1) as the peer's FIN is taken in order. */
	if (sk->__sk_common.skc_flags & (1UL << 1))
		flags |= CL_FIN_RECEIVED;
	e->a = flags;
	e->b = close_how(o, oldstate);
	e->c = sk->sk_err;
	e->bytes_acked = tp->bytes_acked;
	e->bytes_received = tp->bytes_received;
	e->born_ns = o->start_ns;
	submit(e);
}

SEC("tp_btf/inet_sock_set_state")
int inet_sock_set_state(__u64 *ctx)
{
	const struct sock *sk = (const struct sock *)ctx[0];
	int oldstate = (int)ctx[1];
	int newstate = (int)ctx[2];
	/* An accepted socket's process shows itself when it closes it (track_connections). */
	bool closing = track_connections && (newstate == TCP_FIN_WAIT1 || newstate == TCP_LAST_ACK);
	/* Half of a connection's transitions (to FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT, LAST_ACK,
	 * SYN_RECV...) tell nothing used here: leave before any memory is touched. */
	if (newstate != TCP_SYN_SENT && newstate != TCP_ESTABLISHED && newstate != TCP_CLOSE &&
	    !closing)
		return 0;
	if (!is_tcp(sk))
		return 0;
	__u32 ns = sk_netns(sk);
	if (!netns_ok(ns))
		return 0;
	if (closing) {
		owner_closer(sk);
		return 0;
	}
	struct owner copy;
	if (newstate == TCP_SYN_SENT) {
		/* connect(): process context, the caller owns the socket. */
		struct owner o = {};
		o.start_ns = bpf_ktime_get_ns();
		o.tgid = current_process(o.comm);
		owner_put(sk, &o);
		count(C_CONNECT);
		return 0;
	}
	if (oldstate == TCP_SYN_RECV && newstate == TCP_ESTABLISHED) {
		count(C_ACCEPTED);
		/* When it was accepted (its handshake completed), for its lifetime; not over the
		 * owner of a simultaneous open, which connect() made. */
		if (track_connections && !owner_get_any(sk, &copy)) {
			struct owner o = {};
			o.start_ns = bpf_ktime_get_ns();
			o.flags = O_PASSIVE;
			owner_put(sk, &o);
		}
		return 0;
	}
	if (oldstate == TCP_SYN_SENT && newstate == TCP_ESTABLISHED) {
		count(C_CONNECTED);
		struct owner *o = owner_get(sk, &copy);
		if (!o || !(o->flags & (O_SYN_RETRANS | O_STALE_ACK)))
			return 0;
		struct event *e = reserve(K_CONNECTED, ns);
		if (!e)
			return 0;
		fill_sock(e, sk);
		fill_owner(e, sk, false);
		e->a = o->flags;
		e->b = (__u32)((e->ts_ns - o->start_ns) / 1000); /* connect time, us */
		submit(e);
		return 0;
	}
	if (newstate != TCP_CLOSE)
		return 0;
	count(C_CLOSED);
	/* A connect that ended: counted here, before any owner lookup, so that the counts
	 * are exact whether or not a record can be sent. A connect that never sent its SYN
	 * failed inside connect() (tcp_v4_connect, tcp_v6_connect: tcp_set_state(TCP_CLOSE)
	 * on the failure path). Between SYN_SENT and the SYN the only step that fails in
	 * practice is taking the 4-tuple (inet_hash_connect): EADDRNOTAVAIL, for want of a
	 * free port, or, for a port bound before connect(), because the 4-tuple is taken.
	 * Still in the caller's context. */
	bool unsent = false;
	if (oldstate == TCP_SYN_SENT) {
		struct tcp_sock *tp = tcp_sk(sk);
		unsent = tp && tp->segs_out == 0;
		if (unsent) {
			count(C_CONNECT_ERR);
			count(C_EADDRNOTAVAIL);
		} else if (sk->sk_err) {
			count(C_CONNECT_FAILED);
		}
	}
	struct owner *o = owner_get_any(sk, &copy);
	if (!o)
		return 0;
	/* A connect() that failed before its SYN used no 4-tuple: no connection to report. */
	if (track_connections && !unsent)
		conn_closed(sk, ns, o, oldstate);
	if (o->flags & O_PASSIVE) {
		owner_clear(sk);
		return 0;
	}
	/* An active open closes: remember how, for the next connect on this 4-tuple. */
	struct hist h = {};
	h.close_ns = bpf_ktime_get_ns();
	h.tgid = o->tgid;
	__builtin_memcpy(h.comm, o->comm, 16);
	h.how = close_how(o, oldstate);
	if (oldstate == TCP_SYN_SENT) {
		struct event *e = reserve(unsent ? K_CONNECT_ERR : K_CONNECT_FAILED, ns);
		if (e) {
			fill_sock(e, sk);
			fill_owner(e, sk, unsent);
			e->a = unsent ? EADDRNOTAVAIL : o->flags;
			e->b = (__u32)((e->ts_ns - o->start_ns) / 1000);
			/* ETIMEDOUT (tcp_write_err), ECONNREFUSED (tcp_reset), or 0 when the
			 * application closed the connecting socket itself. */
			e->c = sk->sk_err;
			submit(e);
		}
		if (unsent) {
			/* No 4-tuple was used: nothing to remember. */
			owner_clear(sk);
			return 0;
		}
	}
	struct tuple t;
	tuple_of(&t, sk, ns);
	hist_put(&t, &h);
	owner_clear(sk);
	return 0;
}

/* ---- drops -------------------------------------------------------------------------- */

SEC("tp_btf/kfree_skb")
int kfree_skb(__u64 *ctx)
{
	const struct sk_buff *skb = (const struct sk_buff *)ctx[0];
	__u32 reason = (__u32)ctx[2];
	/* The socket that received it (full, request or TIME_WAIT), else the sender's. */
	const struct sock *sk = (const struct sock *)ctx[3];
	if (!sk)
		sk = skb->sk;
	struct net_device *dev = skb->dev;
	__u32 ns = 0;
	if (dev)
		ns = dev->nd_net.net->ns.inum;
	else if (sk)
		ns = sk_netns(sk);
	else
		return 0;
	if (!netns_ok(ns))
		return 0;
	__u32 r = reason < DROP_REASONS ? reason : DROP_REASONS - 1;
	__u32 *quiet = bpf_map_lookup_elem(&quiet_reasons, &r);
	if (quiet && *quiet) {
		/* Counted apart from drops, never parsed or sent (once per connection under
		 * churn): a closing socket freeing its own queues loses nothing on the path. */
		if (sk && sk->__sk_common.skc_family != 1 /* AF_UNIX */ && is_tcp(sk)) {
			__u64 *v = bpf_map_lookup_elem(&drop_reasons, &r);
			if (v)
				*v += 1;
			count(C_DROP_BENIGN);
		}
		return 0;
	}
	struct event tmp = {};
	int flags = fill_from_skb(&tmp, skb);
	if (flags < 0)
		return 0;
	__u8 state = sk ? sk->__sk_common.skc_state : 0;
	/* A timewait mini-socket (sk_state TIME_WAIT) is in TIME_WAIT proper, or is a socket
	 * orphaned in FIN_WAIT2 (tcp_time_wait(sk, TCP_FIN_WAIT2, ...), net/ipv4/tcp.c):
	 * tw_substate says which. Read only for packets that reach one. */
	__u8 substate = 0;
	if (state == TCP_TIME_WAIT)
		substate = BPF_CORE_READ((const struct inet_timewait_sock *)sk, tw_substate);
	if (state == TCP_TIME_WAIT && (flags & 0x12) == 0x02) {
		/* A SYN that a timewait socket did not accept as a new connection
		 * (tcp_timewait_state_process, net/ipv4/tcp_minisocks.c). In TIME_WAIT it could
		 * not be told apart from an old duplicate; in FIN_WAIT2 it lies outside the old
		 * connection's window. Either way the peer gets an ACK of the old connection
		 * (unless rate-limited: TcpExtTCPACKSkippedTimeWait, ...FinWait2). */
		count(C_TW_ACK);
		struct event *e = reserve(K_TW_ACK, ns);
		if (e) {
			fill_common(e, &sk->__sk_common);
			e->state = TCP_TIME_WAIT;
			e->a = reason;
			e->b = substate;
			e->c = flags;
			submit(e);
		}
	}
	__u64 *v = bpf_map_lookup_elem(&drop_reasons, &r);
	if (v)
		*v += 1;
	count(C_DROP_TCP);
	struct event *e = reserve(K_DROP, ns);
	if (!e)
		return 0;
	__builtin_memcpy(e->saddr, tmp.saddr, 16);
	__builtin_memcpy(e->daddr, tmp.daddr, 16);
	e->family = tmp.family;
	e->sport = tmp.sport;
	e->dport = tmp.dport;
	e->a = reason;
	e->c = flags | (__u32)substate << 8;
	if (dev) {
		e->b = dev->ifindex;
		bpf_probe_read_kernel_str(e->ifname, 16, dev->name);
	}
	if (sk) {
		e->sk = (__u64)sk;
		e->state = state;
		if (state != TCP_TIME_WAIT && state != 12 /* NEW_SYN_RECV */) {
			e->ino = sk_ino(sk);
			fill_owner(e, sk, false);
		}
	}
	submit(e);
	return 0;
}

/* ---- windows ------------------------------------------------------------------------ */

/* Every segment an established socket receives (tcp_rcv_established). Two things matter:
 * the peer closing its window to zero (the sender's view of a slow reader), and a
 * zero-window probe reaching a socket whose own window is zero (the reader's view: this
 * socket's process is not reading). Everything else returns after a few loads. */
SEC("tp_btf/tcp_probe")
int tcp_probe(__u64 *ctx)
{
	const struct sock *sk = (const struct sock *)ctx[0];
	const struct sk_buff *skb = (const struct sk_buff *)ctx[1];
	struct tcp_sock *tp = tcp_sk(sk);
	if (!tp)
		return 0;
	/* Header bytes 12-15 (data offset, flags, window) in one read; the sequence number
	 * only for a segment that may be a window probe. */
	__u8 hdr[4];
	if (bpf_probe_read_kernel(hdr, sizeof(hdr), skb->data + 12))
		return 0;
	if (hdr[1] & 0x07) /* FIN, SYN, RST */
		return 0;
	bool peer_zero = hdr[2] == 0 && hdr[3] == 0 && tp->snd_wnd != 0;
	if (!peer_zero) {
		__u32 payload = skb->len - (hdr[0] >> 4) * 4;
		__s32 rwin = (__s32)(tp->rcv_wup + tp->rcv_wnd - tp->rcv_nxt);
		if (payload != 0 || rwin > 0)
			return 0;
		/* tcp_xmit_probe_skb sends snd_una - 1 with no data: an old sequence number. */
		__u32 seq_be;
		if (bpf_probe_read_kernel(&seq_be, sizeof(seq_be), skb->data + 4))
			return 0;
		if (__builtin_bswap32(seq_be) != tp->rcv_nxt - 1)
			return 0;
	}
	__u32 ns = sk_netns(sk);
	if (!netns_ok(ns))
		return 0;
	count(peer_zero ? C_ZERO_WINDOW : C_WINDOW_PROBE);
	struct event *e = reserve(peer_zero ? K_ZERO_WINDOW : K_WINDOW_PROBE, ns);
	if (!e)
		return 0;
	fill_sock(e, sk);
	fill_owner(e, sk, false);
	e->a = tp->inet_conn.icsk_probes_out;
	e->b = tp->snd_wnd;
	submit(e);
	return 0;
}
