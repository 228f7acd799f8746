/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP wire format: the listen handle, the hello that opens every socket, control frames and
 * data chunk headers. All integers little-endian, every field validated on decode. This is
 * the only code that parses bytes from the network; the fuzz target drives all of it.
 */
#ifndef FTCC_TCP_WIRE_H
#define FTCC_TCP_WIRE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define TCP_WIRE_MAGIC 0x43435446u /* "FTCC" */
#define TCP_WIRE_VERSION 1
#define TCP_MAX_STREAMS 16

/* A socket address as carried on the wire (IPv4 or IPv6). */
struct tcp_wire_addr {
	uint16_t family; /* AF_INET or AF_INET6 */
	uint16_t port;	 /* host order */
	uint8_t ip[16];	 /* 4 bytes used for AF_INET */
};

/* The listen handle NCCL ships to the connecting peer (fits FTCC_HANDLE_SIZE). */
struct tcp_handle {
	struct tcp_wire_addr addr; /* the listener's engine port */
	uint64_t listen_id;	   /* which listen object on that engine */
	uint64_t comm_id;	   /* NCCL communicator hash of the listener's ctx */
	uint64_t incarnation;	   /* listener ctx incarnation */
};
#define TCP_HANDLE_WIRE_SIZE 64

enum tcp_hello_type {
	TCP_HELLO_CTRL = 1,  /* first or renewed control socket of a connection */
	TCP_HELLO_DATA = 2,  /* a data socket joining generation @gen of @conn_id */
	TCP_HELLO_PROBE = 3, /* liveness probe: the sender closes right after */
};

/* First bytes on every socket a connector opens. */
struct tcp_hello {
	uint16_t type;
	uint16_t stream;	   /* data socket index (DATA) */
	uint16_t nstreams;	   /* data sockets per connection (CTRL) */
	uint32_t gen;		   /* connection generation: 1 first, +1 per reconnect */
	uint64_t listen_id;	   /* from the handle */
	uint64_t comm_id;	   /* connector's communicator hash */
	uint64_t listener_inc;	   /* incarnation the connector expects at the listener */
	uint64_t incarnation;	   /* connector's own incarnation */
	uint64_t conn_id;	   /* connector-chosen id, stable across reconnects */
	struct tcp_wire_addr self; /* the connector's engine port, for liveness probes */
};
#define TCP_HELLO_WIRE_SIZE 80

enum tcp_frame_type {
	TCP_FRAME_HEARTBEAT = 1, /* u64 sender's NCCL rank + 1 (0 unknown) */
	TCP_FRAME_ACK = 2,	 /* u64 cumulative: every message below it is received */
	TCP_FRAME_WELCOME = 3,	 /* u32 gen, u64 cumulative, u8 done[32]: resume state */
	TCP_FRAME_CLOSE = 4,	 /* orderly close by the peer */
};
#define TCP_RESUME_WINDOW 256 /* messages tracked above the cumulative ack */
#define TCP_FRAME_HDR_SIZE 8
#define TCP_FRAME_MAX_PAYLOAD 64

/* A control frame (header + payload decoded). */
struct tcp_frame {
	uint16_t type;
	uint64_t value;			     /* HEARTBEAT rank+1, ACK / WELCOME cumulative */
	uint32_t gen;			     /* WELCOME */
	uint8_t done[TCP_RESUME_WINDOW / 8]; /* WELCOME: bit i = message cumulative+i received */
};

/* Header of one piece of one message on a data socket; @len payload bytes follow. */
struct tcp_chunk {
	uint32_t tag;
	uint64_t seq;	 /* message number on this connection */
	uint64_t total;	 /* whole message size */
	uint64_t offset; /* of this piece within the message */
	uint64_t len;
};
#define TCP_CHUNK_WIRE_SIZE 40

/* Encoders write exactly the WIRE_SIZE bytes; decoders return 0 or -EBADMSG (bad magic,
 * version, type or an out-of-range field) or -EPROTO (foreign version). */
void tcp_handle_encode(const struct tcp_handle *h, uint8_t *buf);
int tcp_handle_decode(const uint8_t *buf, size_t len, struct tcp_handle *h);
void tcp_hello_encode(const struct tcp_hello *h, uint8_t *buf);
int tcp_hello_decode(const uint8_t *buf, size_t len, struct tcp_hello *h);
void tcp_chunk_encode(const struct tcp_chunk *c, uint8_t *buf);
int tcp_chunk_decode(const uint8_t *buf, size_t len, struct tcp_chunk *c);

/* Writes frame @f into @buf (at least TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD bytes);
 * returns the encoded length. */
size_t tcp_frame_encode(const struct tcp_frame *f, uint8_t *buf);
/* Returns the total length of the frame starting at @buf once its header is complete
 * (@len >= TCP_FRAME_HDR_SIZE), 0 when more header bytes are needed, -EBADMSG on garbage. */
int tcp_frame_length(const uint8_t *buf, size_t len);
/* Decodes one whole frame of @len bytes. */
int tcp_frame_decode(const uint8_t *buf, size_t len, struct tcp_frame *f);

/* Conversions between socket addresses and the wire form. 0 or -EAFNOSUPPORT. */
int tcp_wire_addr_from_sa(struct tcp_wire_addr *w, const struct sockaddr *sa);
socklen_t tcp_wire_addr_to_sa(const struct tcp_wire_addr *w, struct sockaddr_storage *ss);
/* "1.2.3.4:567" or "[::1]:567". */
void tcp_wire_addr_str(const struct tcp_wire_addr *w, char *buf, size_t len);

#endif
