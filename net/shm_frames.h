#ifndef ASGD_NET_SHM_FRAMES_H
#define ASGD_NET_SHM_FRAMES_H
// Parameter payloads through shared memory between the processes of one
// machine (--ps-transport shm; docs/protocol.md, "Payloads in shared memory").
//
// Over loopback TCP a payload is copied into the kernel by the sender's I/O
// thread and out again by the receiver's, and those two threads took more of
// a BSP round's CPU than the step (docs/benchmarks.md). Here the sending
// thread copies a PUSH's or PARAMS's payload frames once into a slot of its
// own arena (a file in /dev/shm, one per sending thread) and sends, in place
// of each frame, a 48-byte reference; the receiver maps the arena (once per
// peer) and reads the frame where it lies, without a copy. The slot is the
// receiver's until the frame is closed, then back to its sender.
//
// The slot's state word orders the two sides: it counts the frames over the
// slot that receivers hold. The sender adds one with release after its copy
// (a slot: 0 to 1), the receiver loads it with acquire before reading; the
// receiver subtracts one with release after its last read, the sender loads
// it with acquire before writing again, which it does only at 0. No byte of
// a slot is written by one side while the other may read it.
//
// When no slot fits (all held, the arena full, /dev/shm out of space) the
// message simply travels inline: a reference is an optimisation, never the
// only way a message can go. Receiving references needs nothing turned on;
// a reference this process cannot map (another machine) is refused as
// WIRE_STATUS_BAD_SHM.
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "net/wire.h"

// What travels in place of a frame (docs/protocol.md): both ends are on one
// machine, so in host byte order. The arena's name in /dev/shm is
// asgd-pf-<uid>-<run id, 16 hex digits>-<pid>-<index>.
typedef struct shm_ref {
    uint64_t magic;  // SHM_REF_MAGIC
    uint64_t run_id;
    uint64_t token;  // the arena's, checked against its header (a name reused by a later process is refused)
    uint32_t pid, index;  // the arena's name
    uint64_t offset;  // of the slot's bytes from the arena's start
    uint64_t len;  // the frame's bytes
} shm_ref_t;
#define SHM_REF_MAGIC 0x3146454d48534441ull  // "ADSHMEF1"

// A message whose payload frames are at least this many bytes together goes
// by reference; a smaller one costs less to copy through the socket.
#define SHM_FRAMES_MIN_BYTES ((size_t)32 * 1024)

// Turns references on for this process's PUSH and PARAMS sends; run_id goes
// into the arenas' names (so that a launcher can remove what a killed
// process left: shm_frames_remove_run). Returns 0.
int shm_frames_enable(uint64_t run_id);
// Sends go inline again and this process's arenas lose their names in
// /dev/shm (peers that mapped them keep them). Call when no thread of this
// process sends any more.
void shm_frames_disable(void);
// Removes every arena name in /dev/shm left by run_id's processes (a process
// killed before shm_frames_disable). Returns how many were removed.
size_t shm_frames_remove_run(uint64_t run_id);
// The name (for shm_open) of another segment of run_id's, `what` after the
// run's prefix, so that shm_frames_remove_run removes it too. Returns 0, or
// -1 when len is too small.
int shm_frames_segment_name(uint64_t run_id, const char *what, char *out, size_t len);

// Sender: when references are on for h's type and frames[0..n) (together at
// least SHM_FRAMES_MIN_BYTES) fit into free slots of the calling thread's
// arena, copies them there, replaces each by its reference and returns 1:
// the header sent with them must carry WIRE_FLAG_SHM. Otherwise returns 0
// with the frames untouched.
int shm_frames_pack(const wire_header_t *h, zmq_msg_t *frames, size_t n);
// Sender: a frame of `bytes` for the caller to fill, over a slot of the
// calling thread's arena, which shm_frames_pack then sends from that thread
// by reference without copying it (again for each resend); the slot stays
// the sender's until the frame and every copy of it are closed. Returns 0
// with *frame made, or -1 (references off, under SHM_FRAMES_MIN_BYTES, no
// slot): the caller makes a frame of its own.
int shm_frames_frame(size_t bytes, zmq_msg_t *frame);
// A reference frame that was never sent (its send failed): its slot back to
// the sender, the frame closed. Other frames are just closed.
void shm_frames_drop_unsent(zmq_msg_t *frame);

// Receiver: each of frames[0..n) (references) replaced by a frame over the
// referenced bytes in the sender's arena, mapped on first use. Returns
// WIRE_STATUS_OK, or WIRE_STATUS_BAD_SHM (the frames then hold a mix: close
// them all as usual).
wire_status_t shm_frames_unpack(uint64_t run_id, zmq_msg_t *frames, size_t n);

// A buffer its caller keeps in an arena of this process (not a slot for one
// message): for values that replies send as they stand, to several
// receivers (a shard's values, ps_reply.h). A frame over exactly the whole
// buffer goes by reference without a copy;
// each such frame counts as one reader until its receiver closes it, so one
// buffer can be read by every worker at once. Returns the buffer (64-byte
// aligned, zeroed) and *out, or NULL when references are off or the arena
// has no room (the caller then uses memory of its own).
typedef struct shm_lend shm_lend_t;
void *shm_frames_lend_new(size_t bytes, shm_lend_t **out);
// Frames over it sent by reference that their receivers have not closed yet;
// at 0 (acquire) their reads happened before the caller's next write.
uint32_t shm_frames_lend_readers(const shm_lend_t *l);
// Gives up the buffer's bookkeeping. Its memory stays in the arena while the
// process lives (a receiver may still read it): NULLs *l.
void shm_frames_lend_destroy(shm_lend_t **l);

// This process's totals, for tests and the summary.
typedef struct shm_frames_counts {
    uint64_t packed;  // messages sent by reference
    uint64_t without_copy;  // frames of them that went without a copy (a lent buffer, a slot filled in place)
    uint64_t inline_for_want_of_slot;  // messages that could have gone by reference but found no free slot
    uint64_t slots;  // slots carved, all arenas
    uint64_t unpacked;  // messages received by reference
} shm_frames_counts_t;
void shm_frames_counts(shm_frames_counts_t *out);

#endif
