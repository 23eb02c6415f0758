// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading undo files: validate every byte, describe the file, and roll an
 * operation back (see undo.h for the rules, doc/undo-format.md for the
 * layout). Nothing is written to a device before the whole file has been
 * read and checked. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btk/endian_access.h>
#include <btk/format.h>
#include <btk/names.h>
#include <btk/super.h>
#include <btk/undo.h>
#include "libfs/undo_format.h"
#include "libfs/fdio.h"

struct batch_ref {
	uint64_t pos;               /* of the batch header */
	uint64_t payload_len;
	uint32_t nrecords;
};

struct super_rec {
	unsigned dev;
	uint64_t offset;
	uint64_t generation;
	uint8_t fsid[16];
	uint32_t crc;
};

/* A validated undo file. */
struct undo_scan {
	int fd;
	struct undo_summary sum;
	uint64_t *dev_max_end;      /* highest offset + length restored, per device */
	struct batch_ref *batches;
	size_t nbatches;
	struct super_rec *supers;
	size_t nsupers;
	char *msg;
	size_t msglen;
};

static int scan_fail(struct undo_scan *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int scan_fail(struct undo_scan *s, int err, const char *fmt, ...)
{
	va_list ap;

	if (s->msg && s->msglen) {
		va_start(ap, fmt);
		vsnprintf(s->msg, s->msglen, fmt, ap);
		va_end(ap);
	}
	return err;
}

static int read_all(int fd, void *buf, size_t len, uint64_t off)
{
	return fd_read_full(fd, buf, len, off);
}

static void scan_release(struct undo_scan *s)
{
	if (s->fd >= 0)
		close(s->fd);
	undo_summary_release(&s->sum);
	free(s->dev_max_end);
	free(s->batches);
	free(s->supers);
}

void undo_summary_release(struct undo_summary *s)
{
	free(s->devices);
	s->devices = NULL;
	s->ndevices = 0;
}

static int scan_read_header(struct undo_scan *s)
{
	uint8_t h[UNDO_HEADER_SIZE];
	int ret;

	if (s->sum.file_size < UNDO_HEADER_SIZE)
		return scan_fail(s, -EUCLEAN, "not an undo file (only %" PRIu64 " bytes)", s->sum.file_size);
	ret = read_all(s->fd, h, sizeof(h), 0);
	if (ret)
		return scan_fail(s, ret, "cannot read the undo file header: %s", strerror(-ret));
	if (memcmp(h + UH_MAGIC, UNDO_MAGIC, 8) != 0)
		return scan_fail(s, -EUCLEAN, "not a btk undo file (bad magic)");
	if (undo_crc(h, UH_CRC) != get_le32(h + UH_CRC))
		return scan_fail(s, -EUCLEAN, "undo file header is damaged (checksum mismatch)");
	s->sum.version = get_le32(h + UH_VERSION);
	if (s->sum.version != UNDO_VERSION)
		return scan_fail(s, -EUCLEAN, "undo file version %u is not supported (this btk reads %u)",
				 s->sum.version, UNDO_VERSION);
	if (get_le32(h + UH_HEADER_SIZE) != UNDO_HEADER_SIZE || get_le32(h + UH_BLOCK_SIZE) != UNDO_BLOCK_SIZE)
		return scan_fail(s, -EUCLEAN, "undo file header has an unexpected geometry");
	if (get_le32(h + UH_STATE) > UNDO_STATE_FINISHED)
		return scan_fail(s, -EUCLEAN, "undo file header has an unknown state %u", get_le32(h + UH_STATE));
	memcpy(s->sum.fsid, h + UH_FSID, 16);
	s->sum.generation_before = get_le64(h + UH_GEN_BEFORE);
	s->sum.created = get_le64(h + UH_CREATED);
	s->sum.finished = get_le32(h + UH_STATE) == UNDO_STATE_FINISHED;
	return 0;
}

/* Is there a valid trailer at the very end? 1 yes (fields read), 0 no. */
static int scan_read_trailer(struct undo_scan *s, uint64_t *batches, uint64_t *records, uint32_t *body_crc)
{
	uint8_t t[UNDO_TRAILER_SIZE];
	uint64_t at;

	if (s->sum.file_size < UNDO_HEADER_SIZE + UNDO_TRAILER_SIZE)
		return 0;
	at = s->sum.file_size - UNDO_TRAILER_SIZE;
	if (read_all(s->fd, t, sizeof(t), at))
		return 0;
	if (get_le32(t + UT_MAGIC) != UNDO_TRAILER_MAGIC || undo_crc(t, UT_CRC) != get_le32(t + UT_CRC) ||
	    get_le64(t + UT_OFFSET) != at || get_le32(t + UT_VERSION) != UNDO_VERSION)
		return 0;
	s->sum.generation_after = get_le64(t + UT_GEN_AFTER);
	*batches = get_le64(t + UT_BATCHES);
	*records = get_le64(t + UT_RECORDS);
	*body_crc = get_le32(t + UT_BODY_CRC);
	return 1;
}

/* Check the records of one batch whose checksums are right: anything wrong
 * now is damage, never a torn write. */
static int scan_parse_payload(struct undo_scan *s, const uint8_t *p, uint64_t len, uint32_t nrecords,
			      uint64_t batch_pos)
{
	uint64_t q = 0;

	for (uint32_t i = 0; i < nrecords; i++) {
		unsigned type, dev;
		if (len - q < 8)
			return scan_fail(s, -EUCLEAN, "batch at %" PRIu64 ": record %u runs past the batch",
					 batch_pos, i);
		type = get_le16(p + q + UR_TYPE);
		dev = get_le32(p + q + UR_DEV);
		if (type == UNDO_REC_DEVICE) {
			struct undo_device_info *di;
			uint64_t *ends;
			if (len - q < UNDO_REC_DEVICE_LEN || dev != s->sum.ndevices ||
			    get_le64(p + q + UR_DEVICE_DEVID) == 0)
				return scan_fail(s, -EUCLEAN, "batch at %" PRIu64 ": bad device record %u",
						 batch_pos, i);
			di = realloc(s->sum.devices, (dev + 1) * sizeof(*di));
			if (!di)
				return -ENOMEM;
			s->sum.devices = di;
			ends = realloc(s->dev_max_end, (dev + 1) * sizeof(*ends));
			if (!ends)
				return -ENOMEM;
			s->dev_max_end = ends;
			di = &s->sum.devices[dev];
			memset(di, 0, sizeof(*di));
			di->devid = get_le64(p + q + UR_DEVICE_DEVID);
			memcpy(di->uuid, p + q + UR_DEVICE_UUID, 16);
			di->size = get_le64(p + q + UR_DEVICE_SIZE);
			ends[dev] = 0;
			s->sum.ndevices++;
			q += UNDO_REC_DEVICE_LEN;
		} else if (type == UNDO_REC_DATA) {
			uint64_t off, n;
			if (len - q < UNDO_REC_DATA_HEAD || dev >= s->sum.ndevices)
				return scan_fail(s, -EUCLEAN, "batch at %" PRIu64 ": bad data record %u",
						 batch_pos, i);
			off = get_le64(p + q + UR_DATA_OFFSET);
			n = get_le32(p + q + UR_DATA_LENGTH);
			if (n == 0 || undo_align8(UNDO_REC_DATA_HEAD + n) > len - q ||
			    off > s->sum.devices[dev].size || n > s->sum.devices[dev].size - off)
				return scan_fail(s, -EUCLEAN,
						 "batch at %" PRIu64 ": data record %u (offset %" PRIu64
						 ", %" PRIu64 " bytes) does not fit", batch_pos, i, off, n);
			s->sum.devices[dev].records++;
			s->sum.devices[dev].bytes += n;
			s->sum.records++;
			s->sum.bytes += n;
			if (off + n > s->dev_max_end[dev])
				s->dev_max_end[dev] = off + n;
			q += undo_align8(UNDO_REC_DATA_HEAD + n);
		} else if (type == UNDO_REC_SUPER) {
			struct super_rec *sr;
			if (len - q < UNDO_REC_SUPER_LEN || dev >= s->sum.ndevices)
				return scan_fail(s, -EUCLEAN, "batch at %" PRIu64 ": bad superblock record %u",
						 batch_pos, i);
			sr = realloc(s->supers, (s->nsupers + 1) * sizeof(*sr));
			if (!sr)
				return -ENOMEM;
			s->supers = sr;
			sr = &s->supers[s->nsupers++];
			sr->dev = dev;
			sr->offset = get_le64(p + q + UR_SUPER_OFFSET);
			sr->generation = get_le64(p + q + UR_SUPER_GEN);
			memcpy(sr->fsid, p + q + UR_SUPER_FSID, 16);
			sr->crc = get_le32(p + q + UR_SUPER_CRC);
			if (sr->generation > s->sum.max_super_generation)
				s->sum.max_super_generation = sr->generation;
			s->sum.super_writes++;
			q += UNDO_REC_SUPER_LEN;
		} else {
			return scan_fail(s, -EUCLEAN, "batch at %" PRIu64 ": record %u has unknown type %u",
					 batch_pos, i, type);
		}
	}
	if (q != len)
		return scan_fail(s, -EUCLEAN, "batch at %" PRIu64 ": %" PRIu64 " bytes after its last record",
				 batch_pos, len - q);
	return 0;
}

/* Read the batch at pos into *payload. 0 ok; 1 not a complete valid batch
 * (why says what: a torn write or damage, the caller decides); <0 error. */
static int scan_read_batch(struct undo_scan *s, uint64_t pos, uint64_t end, uint64_t seq,
			   struct batch_ref *ref, uint8_t h[UNDO_BATCH_HEADER_SIZE], uint8_t **payload,
			   char *why, size_t whylen)
{
	uint64_t len;
	int ret;

	*payload = NULL;
	if (end - pos < UNDO_BATCH_HEADER_SIZE) {
		snprintf(why, whylen, "truncated batch header");
		return 1;
	}
	ret = read_all(s->fd, h, UNDO_BATCH_HEADER_SIZE, pos);
	if (ret)
		return scan_fail(s, ret, "cannot read the undo file: %s", strerror(-ret));
	if (get_le32(h + UB_MAGIC) != UNDO_BATCH_MAGIC || undo_crc(h, UB_HEADER_CRC) != get_le32(h + UB_HEADER_CRC)) {
		snprintf(why, whylen, "bad batch header");
		return 1;
	}
	len = get_le64(h + UB_PAYLOAD_LEN);
	if (get_le64(h + UB_SEQ) != seq || len % 8 || len > UNDO_BATCH_PAYLOAD_MAX)
		return scan_fail(s, -EUCLEAN, "batch at %" PRIu64 " is damaged (sequence %" PRIu64
				 ", expected %" PRIu64 ", %" PRIu64 " bytes)", pos, get_le64(h + UB_SEQ), seq, len);
	if (len > end - pos - UNDO_BATCH_HEADER_SIZE) {
		snprintf(why, whylen, "batch of %" PRIu64 " bytes is cut off", len);
		return 1;
	}
	*payload = malloc(len ? len : 1);
	if (!*payload)
		return -ENOMEM;
	ret = read_all(s->fd, *payload, len, pos + UNDO_BATCH_HEADER_SIZE);
	if (ret) {
		free(*payload);
		*payload = NULL;
		return scan_fail(s, ret, "cannot read the undo file: %s", strerror(-ret));
	}
	if (undo_crc(*payload, len) != get_le32(h + UB_PAYLOAD_CRC)) {
		free(*payload);
		*payload = NULL;
		snprintf(why, whylen, "batch checksum mismatch");
		return 1;
	}
	ref->pos = pos;
	ref->payload_len = len;
	ref->nrecords = get_le32(h + UB_NRECORDS);
	return 0;
}

/* After an invalid batch of an unfinished file: only a torn last append may
 * follow, never another valid batch header (that would be damage). */
static int scan_tail_has_batch(struct undo_scan *s, uint64_t from, uint64_t end)
{
	const size_t chunk = 1 << 20;
	uint8_t *buf = malloc(chunk + UNDO_BATCH_HEADER_SIZE);
	int found = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t p = from; p < end && !found; p += chunk) {
		uint64_t n = end - p < chunk + UNDO_BATCH_HEADER_SIZE ? end - p : chunk + UNDO_BATCH_HEADER_SIZE;
		int ret = read_all(s->fd, buf, (size_t)n, p);
		if (ret) {
			found = ret;
			break;
		}
		for (uint64_t i = 0; i + UNDO_BATCH_HEADER_SIZE <= n && i < chunk; i += 8)
			if (get_le32(buf + i + UB_MAGIC) == UNDO_BATCH_MAGIC &&
			    undo_crc(buf + i, UB_HEADER_CRC) == get_le32(buf + i + UB_HEADER_CRC)) {
				found = 1;
				break;
			}
	}
	free(buf);
	return found;
}

/* Open and validate a whole undo file. */
static int scan_open(const char *path, struct undo_scan *s, char *msg, size_t msglen)
{
	uint64_t trailer_batches = 0, trailer_records = 0, end, pos, seq = 0;
	uint32_t trailer_crc = 0, body_crc = ~0U;
	struct stat st;
	int has_trailer, ret;

	memset(s, 0, sizeof(*s));
	s->msg = msg;
	s->msglen = msglen;
	if (msg && msglen)
		msg[0] = 0;
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0)
		return scan_fail(s, -errno, "cannot open %s: %s", path, strerror(errno));
	if (fstat(s->fd, &st) < 0)
		return scan_fail(s, -errno, "cannot stat %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return scan_fail(s, -EINVAL, "%s is not a regular file", path);
	s->sum.file_size = (uint64_t)st.st_size;
	ret = scan_read_header(s);
	if (ret)
		return ret;
	has_trailer = scan_read_trailer(s, &trailer_batches, &trailer_records, &trailer_crc);
	if (s->sum.finished && !has_trailer)
		return scan_fail(s, -EUCLEAN, "the undo file is marked finished but its trailer is missing "
				 "or damaged (truncated?)");
	s->sum.finished = has_trailer;
	end = has_trailer ? s->sum.file_size - UNDO_TRAILER_SIZE : s->sum.file_size;
	for (pos = UNDO_HEADER_SIZE; pos < end; seq++) {
		uint8_t h[UNDO_BATCH_HEADER_SIZE], *payload;
		struct batch_ref ref, *refs;
		char why[128];

		ret = scan_read_batch(s, pos, end, seq, &ref, h, &payload, why, sizeof(why));
		if (ret < 0)
			return ret;
		if (ret == 1) {
			if (has_trailer)
				return scan_fail(s, -EUCLEAN, "undo file is damaged at offset %" PRIu64 ": %s",
						 pos, why);
			ret = scan_tail_has_batch(s, pos + 8, end);
			if (ret < 0)
				return scan_fail(s, ret, "cannot read the undo file: %s", strerror(-ret));
			if (ret)
				return scan_fail(s, -EUCLEAN, "undo file is damaged at offset %" PRIu64
						 " (%s) and more records follow", pos, why);
			s->sum.torn_tail = end - pos; /* never synced: its writes never happened */
			break;
		}
		ret = scan_parse_payload(s, payload, ref.payload_len, ref.nrecords, pos);
		if (!ret && has_trailer) {
			body_crc = crc32c_btrfs(body_crc, h, sizeof(h));
			body_crc = crc32c_btrfs(body_crc, payload, ref.payload_len);
		}
		free(payload);
		if (ret)
			return ret;
		refs = realloc(s->batches, (s->nbatches + 1) * sizeof(*refs));
		if (!refs)
			return -ENOMEM;
		s->batches = refs;
		s->batches[s->nbatches++] = ref;
		pos += UNDO_BATCH_HEADER_SIZE + ref.payload_len;
	}
	s->sum.batches = s->nbatches;
	if (has_trailer && (~body_crc != trailer_crc || trailer_batches != s->nbatches ||
			    trailer_records != s->sum.records))
		return scan_fail(s, -EUCLEAN, "undo file is damaged: the trailer does not match its contents");
	return 0;
}

int undo_info(const char *path, struct undo_summary *out, char *msg, size_t msglen)
{
	struct undo_scan s;
	int ret = scan_open(path, &s, msg, msglen);

	memset(out, 0, sizeof(*out));
	if (!ret) {
		*out = s.sum;
		s.sum.devices = NULL;
		s.sum.ndevices = 0;
	}
	scan_release(&s);
	return ret;
}

/* What a device's superblock says now. */
struct current_super {
	unsigned given;             /* index into devs */
	uint64_t generation;
	uint64_t offset;            /* of the copy in use */
	uint32_t crc;
	uint8_t fsid[16];
};

/* Pair every device of the file with exactly one given device. */
static int apply_match_devices(struct undo_scan *s, struct io_dev **devs, unsigned ndevs,
			       struct current_super *cur)
{
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	char u[UUID_STR_BUF];

	for (unsigned j = 0; j < s->sum.ndevices; j++)
		cur[j].given = UINT32_MAX;
	for (unsigned i = 0; i < ndevs; i++) {
		const uint8_t *di;
		unsigned j;
		int chosen = super_read_best(devs[i], -1, sb, copies);

		if (chosen < 0)
			return scan_fail(s, -ENODEV, "%s: no valid btrfs superblock", devs[i]->path);
		di = super_dev_item_ptr(sb);
		for (j = 0; j < s->sum.ndevices; j++)
			if (s->sum.devices[j].devid == dev_item_devid(di) &&
			    !memcmp(s->sum.devices[j].uuid, dev_item_uuid_ptr(di), 16))
				break;
		uuid_to_str(dev_item_uuid_ptr(di), u);
		if (j == s->sum.ndevices)
			return scan_fail(s, -ENODEV, "%s (devid %" PRIu64 ", uuid %s) is not a device of this undo file",
					 devs[i]->path, dev_item_devid(di), u);
		if (cur[j].given != UINT32_MAX)
			return scan_fail(s, -ENODEV, "%s and %s are both devid %" PRIu64 " of the filesystem: give each device once",
					 devs[cur[j].given]->path, devs[i]->path, dev_item_devid(di));
		if (io_size(devs[i]) < s->dev_max_end[j])
			return scan_fail(s, -ENODEV, "%s is smaller (%" PRIu64 " bytes) than the undo file needs "
					 "(%" PRIu64 ")", devs[i]->path, io_size(devs[i]), s->dev_max_end[j]);
		cur[j].given = i;
		cur[j].generation = super_generation(sb);
		cur[j].offset = copies[chosen].offset;
		cur[j].crc = undo_crc(sb, BTRFS_SUPER_INFO_SIZE);
		memcpy(cur[j].fsid, super_fsid_ptr(sb), 16);
	}
	for (unsigned j = 0; j < s->sum.ndevices; j++)
		if (cur[j].given == UINT32_MAX) {
			uuid_to_str(s->sum.devices[j].uuid, u);
			return scan_fail(s, -ENODEV, "device devid %" PRIu64 " (uuid %s) of the undo file is not given",
					 s->sum.devices[j].devid, u);
		}
	return 0;
}

/* Is the filesystem still in a state the operation left? (see undo.h) */
static int apply_check_state(struct undo_scan *s, struct io_dev **devs, const struct current_super *cur)
{
	for (unsigned j = 0; j < s->sum.ndevices; j++) {
		const char *path = devs[cur[j].given]->path;
		uint64_t g = cur[j].generation;
		bool fsid_known = !memcmp(cur[j].fsid, s->sum.fsid, 16);
		bool written = false, same = false;

		for (size_t k = 0; k < s->nsupers; k++) {
			const struct super_rec *r = &s->supers[k];
			if (r->dev != j)
				continue;
			if (!memcmp(r->fsid, cur[j].fsid, 16))
				fsid_known = true;
			if (r->generation == g) {
				written = true;
				if (r->offset == cur[j].offset && r->crc == cur[j].crc)
					same = true;
			}
		}
		if (!fsid_known)
			return scan_fail(s, -ESTALE, "%s belongs to another filesystem than the undo file "
					 "(different fsid)", path);
		if (s->sum.finished && g != s->sum.generation_after && g == s->sum.generation_before)
			return scan_fail(s, -ESTALE, "%s: filesystem generation is %" PRIu64 ", the one before the "
					 "operation: it was rolled back already", path, g);
		if (s->sum.finished && g != s->sum.generation_after)
			return scan_fail(s, -ESTALE, "%s: filesystem generation is %" PRIu64 " but the operation "
					 "ended at %" PRIu64 ": it was modified since, refusing to roll back",
					 path, g, s->sum.generation_after);
		if (!s->sum.finished && g != s->sum.generation_before && !written)
			return scan_fail(s, -ESTALE, "%s: filesystem generation is %" PRIu64 ", neither the one "
					 "before the operation (%" PRIu64 ") nor one it wrote: it was modified "
					 "since, refusing to roll back", path, g, s->sum.generation_before);
		if (written && !same && g != s->sum.generation_before)
			return scan_fail(s, -ESTALE, "%s: the superblock of generation %" PRIu64 " is not the one "
					 "the operation wrote: refusing to roll back", path, g);
	}
	return 0;
}

/* Write one batch's old bytes back, last record first. */
static int apply_batch(struct undo_scan *s, const struct batch_ref *ref, struct io_dev **devs,
		       const struct current_super *cur)
{
	uint8_t h[UNDO_BATCH_HEADER_SIZE], *p = malloc(ref->payload_len ? ref->payload_len : 1);
	uint64_t *recs = calloc(ref->nrecords ? ref->nrecords : 1, sizeof(*recs));
	size_t n = 0;
	uint64_t q = 0;
	int ret;

	if (!p || !recs) {
		free(p);
		free(recs);
		return -ENOMEM;
	}
	ret = read_all(s->fd, h, sizeof(h), ref->pos);
	if (!ret)
		ret = read_all(s->fd, p, ref->payload_len, ref->pos + UNDO_BATCH_HEADER_SIZE);
	if (!ret && undo_crc(p, ref->payload_len) != get_le32(h + UB_PAYLOAD_CRC))
		ret = scan_fail(s, -EIO, "the undo file changed while it was applied (batch at %" PRIu64 ")",
				ref->pos);
	/* The layout was validated: walk the records, remember the data ones. */
	for (uint32_t i = 0; !ret && i < ref->nrecords; i++) {
		unsigned type = get_le16(p + q + UR_TYPE);
		if (type == UNDO_REC_DATA) {
			recs[n++] = q;
			q += undo_align8(UNDO_REC_DATA_HEAD + get_le32(p + q + UR_DATA_LENGTH));
		} else {
			q += type == UNDO_REC_DEVICE ? UNDO_REC_DEVICE_LEN : UNDO_REC_SUPER_LEN;
		}
	}
	while (!ret && n--) {
		const uint8_t *r = p + recs[n];
		struct io_dev *io = devs[cur[get_le32(r + UR_DEV)].given];
		uint64_t off = get_le64(r + UR_DATA_OFFSET);
		ret = io_write(io, r + UNDO_REC_DATA_HEAD, get_le32(r + UR_DATA_LENGTH), off);
		if (ret)
			scan_fail(s, ret, "%s: writing %u bytes at %" PRIu64 " failed: %s (the roll back is "
				  "incomplete: run btk-undo again)", io->path, get_le32(r + UR_DATA_LENGTH), off,
				  strerror(-ret));
	}
	free(recs);
	free(p);
	return ret;
}

int undo_apply(const char *path, struct io_dev **devs, unsigned ndevs, unsigned flags, char *msg,
	       size_t msglen)
{
	struct current_super *cur = NULL;
	struct undo_scan s;
	int ret = scan_open(path, &s, msg, msglen);

	if (ret)
		goto out;
	cur = calloc(s.sum.ndevices ? s.sum.ndevices : 1, sizeof(*cur));
	if (!cur) {
		ret = -ENOMEM;
		goto out;
	}
	ret = apply_match_devices(&s, devs, ndevs, cur);
	if (ret)
		goto out;
	if (!(flags & UNDO_FORCE)) {
		ret = apply_check_state(&s, devs, cur);
		if (ret)
			goto out;
	}
	if (flags & UNDO_DRY_RUN) {
		scan_fail(&s, 0, "would restore %" PRIu64 " range(s), %" PRIu64 " bytes, on %u device(s) "
			  "(%s undo file)", s.sum.records, s.sum.bytes, s.sum.ndevices,
			  s.sum.finished ? "finished" : "unfinished");
		goto out;
	}
	for (size_t b = s.nbatches; !ret && b-- > 0;)
		ret = apply_batch(&s, &s.batches[b], devs, cur);
	for (unsigned j = 0; !ret && j < s.sum.ndevices; j++) {
		ret = io_flush(devs[cur[j].given]);
		if (ret)
			scan_fail(&s, ret, "%s: flush failed: %s", devs[cur[j].given]->path, strerror(-ret));
	}
	if (!ret)
		scan_fail(&s, 0, "restored %" PRIu64 " range(s), %" PRIu64 " bytes, on %u device(s); "
			  "the filesystem is back at generation %" PRIu64, s.sum.records, s.sum.bytes,
			  s.sum.ndevices, s.sum.generation_before);
out:
	free(cur);
	scan_release(&s);
	return ret;
}
