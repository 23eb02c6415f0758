// SPDX-License-Identifier: GPL-2.0-only
/* Pipe-safe read and write loops for image streams. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "image/imgio.h"

int img_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t img_read_upto(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int img_input_init(struct img_input *in, int fd, const void *prefix, size_t prefix_len)
{
	memset(in, 0, sizeof(*in));
	in->fd = fd;
	if (prefix_len) {
		in->prefix = malloc(prefix_len);
		if (!in->prefix)
			return -ENOMEM;
		memcpy(in->prefix, prefix, prefix_len);
		in->prefix_len = prefix_len;
	}
	return 0;
}

void img_input_release(struct img_input *in)
{
	free(in->prefix);
	in->prefix = NULL;
}

ssize_t img_input_read(struct img_input *in, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t done = 0;
	ssize_t n;

	if (in->prefix_pos < in->prefix_len) {
		size_t k = in->prefix_len - in->prefix_pos;
		if (k > len)
			k = len;
		memcpy(p, in->prefix + in->prefix_pos, k);
		in->prefix_pos += k;
		done = k;
	}
	if (done < len) {
		n = img_read_upto(in->fd, p + done, len - done);
		if (n < 0)
			return n;
		done += (size_t)n;
	}
	in->offset += done;
	return (ssize_t)done;
}
