/* SPDX-License-Identifier: GPL-2.0-only */
/* Sequential reads and writes on a file descriptor that may be a pipe, and
 * an input that first replays bytes already read for format probing. */
#ifndef BTK_IMAGE_IMGIO_H
#define BTK_IMAGE_IMGIO_H

#include <stddef.h>
#include <stdint.h>

/* write() until everything is out: 0 or -errno. */
int img_write_all(int fd, const void *buf, size_t len);

struct img_input {
	int fd;
	uint8_t *prefix;        /* owned copy of probed bytes */
	size_t prefix_len, prefix_pos;
	uint64_t offset;        /* bytes consumed so far */
};

/* Takes a copy of prefix (may be NULL). 0 or -ENOMEM. */
int img_input_init(struct img_input *in, int fd, const void *prefix, size_t prefix_len);
void img_input_release(struct img_input *in);
/* Read up to len bytes, stopping only at the end of the input: returns the
 * number read (< len at the end) or -errno. */
ssize_t img_input_read(struct img_input *in, void *buf, size_t len);
/* Read up to len bytes from a raw fd the same way (probing). */
ssize_t img_read_upto(int fd, void *buf, size_t len);

#endif
