// SPDX-License-Identifier: GPL-2.0-only
/* Writing the native image format: records are packed into frames by the
 * caller's thread, frames are compressed by a pool of workers, and written
 * strictly in order by the caller's thread, with the stream checksum and
 * the frame index kept on the way. */
#include <errno.h>
#include <lz4.h>
#include <lz4hc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "image/fmt_btk.h"
#include "image/imgio.h"
#include <btk/endian_access.h>

enum slot_state { SLOT_FREE, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE };

struct frame_slot {
	enum slot_state state;
	uint64_t seq;
	const struct frame_slot *prev; /* chained: the frame whose raw bytes are this one's zstd prefix */
	uint8_t *raw;
	size_t raw_len;
	uint32_t nrecords;
	uint64_t first_logical, end_logical;
	uint8_t *out;            /* compressed frame: header + payload */
	size_t out_cap, out_len;
	int err;
};

struct btk_writer {
	int fd;
	enum img_compress comp;
	int level;
	bool chain;                     /* zstd frames reference the previous frame's raw bytes */
	unsigned hash_log;              /* zstd match-finder tables: at least this */
	unsigned window_log;
	XXH64_state_t *xxh;
	uint64_t offset;
	size_t frame_raw;
	unsigned nslots, nthreads;
	struct frame_slot *slots;
	uint64_t fill_seq, write_seq;  /* next frame to fill / to write */
	struct frame_slot *cur;         /* frame being filled, NULL if none */
	pthread_t *threads;
	unsigned started;
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	bool stopping;
	uint8_t *index;                 /* BTK_IMG_INDEX_ENTRY bytes per frame */
	size_t index_len, index_cap;
	struct img_totals totals;
	char err[256];
};

const char *img_compress_name(unsigned c)
{
	switch (c) {
	case IMG_COMPRESS_NONE: return "none";
	case IMG_COMPRESS_ZSTD: return "zstd";
	case IMG_COMPRESS_LZ4: return "lz4";
	default: return "unknown";
	}
}

static size_t compress_bound(enum img_compress comp, size_t n)
{
	if (comp == IMG_COMPRESS_ZSTD)
		return ZSTD_compressBound(n);
	if (comp == IMG_COMPRESS_LZ4)
		return (size_t)LZ4_compressBound((int)n);
	return n;
}

/* Compress one frame into slot->out (header + payload). */
static int compress_frame(struct btk_writer *w, struct frame_slot *s, ZSTD_CCtx *zc)
{
	size_t need = BTK_IMG_FRAME_HEADER + compress_bound(w->comp, s->raw_len), clen;
	uint8_t *payload;

	if (need > s->out_cap) {
		uint8_t *p = realloc(s->out, need);
		if (!p)
			return -ENOMEM;
		s->out = p;
		s->out_cap = need;
	}
	payload = s->out + BTK_IMG_FRAME_HEADER;
	if (w->comp == IMG_COMPRESS_ZSTD) {
		if (s->prev && ZSTD_isError(ZSTD_CCtx_refPrefix(zc, s->prev->raw, s->prev->raw_len)))
			return -EIO;
		clen = ZSTD_compress2(zc, payload, need - BTK_IMG_FRAME_HEADER, s->raw, s->raw_len);
		if (ZSTD_isError(clen))
			return -EIO;
	} else if (w->comp == IMG_COMPRESS_LZ4) {
		int n = w->level > 1 ? LZ4_compress_HC((const char *)s->raw, (char *)payload, (int)s->raw_len,
						       (int)(need - BTK_IMG_FRAME_HEADER), w->level)
				     : LZ4_compress_default((const char *)s->raw, (char *)payload,
							    (int)s->raw_len, (int)(need - BTK_IMG_FRAME_HEADER));
		if (n <= 0)
			return -EIO;
		clen = (size_t)n;
	} else {
		memcpy(payload, s->raw, s->raw_len);
		clen = s->raw_len;
	}
	memcpy(s->out, s->prev ? "BFRP" : "BFRM", 4);
	put_le32(s->out + 4, (uint32_t)clen);
	put_le32(s->out + 8, (uint32_t)s->raw_len);
	put_le32(s->out + 12, s->nrecords);
	put_le64(s->out + 16, XXH64(payload, clen, 0));
	s->out_len = BTK_IMG_FRAME_HEADER + clen;
	return 0;
}

/* A zstd context for the writer's settings: the window covers a frame and
 * its prefix; match-finder tables of 1 M entries or more find repeats
 * megabytes apart (the level's own tables are sized for small inputs). */
static ZSTD_CCtx *make_cctx(const struct btk_writer *w)
{
	int level = w->level ? w->level : BTK_IMG_ZSTD_LEVEL;
	/* levels up to 7 have smaller tables by default, the ultra levels a larger window */
	int table_log = level <= 7 ? (int)w->hash_log : 0;
	int window_log = level >= 20 ? 27 : (int)w->window_log;
	ZSTD_CCtx *zc = ZSTD_createCCtx();

	if (zc && (ZSTD_isError(ZSTD_CCtx_setParameter(zc, ZSTD_c_compressionLevel, level)) ||
		   ZSTD_isError(ZSTD_CCtx_setParameter(zc, ZSTD_c_windowLog, window_log)) ||
		   ZSTD_isError(ZSTD_CCtx_setParameter(zc, ZSTD_c_hashLog, table_log)) ||
		   ZSTD_isError(ZSTD_CCtx_setParameter(zc, ZSTD_c_chainLog, table_log)))) {
		ZSTD_freeCCtx(zc);
		zc = NULL;
	}
	return zc;
}

static void *worker_main(void *arg)
{
	struct btk_writer *w = arg;
	ZSTD_CCtx *zc = w->comp == IMG_COMPRESS_ZSTD ? make_cctx(w) : NULL;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct frame_slot *job = NULL;
		for (unsigned i = 0; i < w->nslots; i++)
			if (w->slots[i].state == SLOT_QUEUED && (!job || w->slots[i].seq < job->seq))
				job = &w->slots[i];
		if (!job) {
			if (w->stopping)
				break;
			pthread_cond_wait(&w->work, &w->lock);
			continue;
		}
		job->state = SLOT_BUSY;
		pthread_mutex_unlock(&w->lock);
		job->err = (w->comp == IMG_COMPRESS_ZSTD && !zc) ? -ENOMEM : compress_frame(w, job, zc);
		pthread_mutex_lock(&w->lock);
		job->state = SLOT_DONE;
		pthread_cond_broadcast(&w->done);
	}
	pthread_mutex_unlock(&w->lock);
	ZSTD_freeCCtx(zc);
	return NULL;
}

static int emit(struct btk_writer *w, const void *buf, size_t len)
{
	int ret = img_write_all(w->fd, buf, len);

	if (ret)
		return ret;
	XXH64_update(w->xxh, buf, len);
	w->offset += len;
	w->totals.image_bytes = w->offset;
	return 0;
}

static int index_add(struct btk_writer *w, const struct frame_slot *s)
{
	uint8_t *e;

	if (w->index_len + BTK_IMG_INDEX_ENTRY > w->index_cap) {
		size_t cap = w->index_cap ? w->index_cap * 2 : 64 * BTK_IMG_INDEX_ENTRY;
		uint8_t *p = realloc(w->index, cap);
		if (!p)
			return -ENOMEM;
		w->index = p;
		w->index_cap = cap;
	}
	e = w->index + w->index_len;
	put_le64(e, w->offset);
	put_le64(e + 8, s->first_logical);
	put_le64(e + 16, s->end_logical);
	put_le32(e + 24, (uint32_t)s->raw_len);
	put_le32(e + 28, s->nrecords);
	w->index_len += BTK_IMG_INDEX_ENTRY;
	return 0;
}

/* Wait for the oldest queued frame to be compressed and write it out. */
static int write_oldest(struct btk_writer *w)
{
	struct frame_slot *s = &w->slots[w->write_seq % w->nslots];
	int ret;

	pthread_mutex_lock(&w->lock);
	while (s->state != SLOT_DONE)
		pthread_cond_wait(&w->done, &w->lock);
	pthread_mutex_unlock(&w->lock);
	ret = s->err;
	if (ret)
		snprintf(w->err, sizeof(w->err), "compressing frame %llu failed", (unsigned long long)s->seq);
	if (!ret && !(ret = index_add(w, s)))
		ret = emit(w, s->out, s->out_len);
	if (ret && !w->err[0])
		snprintf(w->err, sizeof(w->err), "writing the image: %s", strerror(-ret));
	w->totals.frames++;
	s->state = SLOT_FREE;
	w->write_seq++;
	return ret;
}

static int submit_current(struct btk_writer *w)
{
	struct frame_slot *s = w->cur;

	if (!s)
		return 0;
	w->cur = NULL;
	pthread_mutex_lock(&w->lock);
	s->state = SLOT_QUEUED;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

static int start_frame(struct btk_writer *w)
{
	struct frame_slot *s;
	int ret;

	/* the slot's last frame is written, and so is the frame that used its raw bytes as a prefix */
	while (w->fill_seq - w->write_seq >= w->nslots - (w->chain ? 1 : 0))
		if ((ret = write_oldest(w)))
			return ret;
	s = &w->slots[w->fill_seq % w->nslots];
	s->prev = w->chain && w->fill_seq ? &w->slots[(w->fill_seq - 1) % w->nslots] : NULL;
	s->seq = w->fill_seq++;
	s->raw_len = 0;
	s->nrecords = 0;
	s->first_logical = UINT64_MAX;
	s->end_logical = 0;
	w->cur = s;
	return 0;
}

/* A frame buffer holds frame_raw bytes, or one record of the largest size. */
static size_t frame_cap(const struct btk_writer *w)
{
	size_t one = BTK_IMG_RECORD_HEADER + BTK_IMG_MAX_RECORD;

	return w->frame_raw > one ? w->frame_raw : one;
}

/* The fixed header, device list, sys_chunk_array and header checksum. */
static int write_header(struct btk_writer *w, const struct img_header *h)
{
	size_t n = BTK_IMG_HEADER_FIXED + (size_t)h->num_devices * BTK_IMG_DEVICE_SIZE + h->sys_chunk_array_size + 8;
	uint8_t *b = calloc(1, n), *p;
	int ret;

	if (!b)
		return -ENOMEM;
	memcpy(b, BTK_IMG_MAGIC, 8);
	put_le32(b + 8, BTK_IMG_VERSION);
	put_le32(b + 12, (uint32_t)n);
	memcpy(b + 16, h->fsid, 16);
	memcpy(b + 32, h->metadata_uuid, 16);
	put_le32(b + 48, h->nodesize);
	put_le32(b + 52, h->sectorsize);
	put_le16(b + 56, h->csum_type);
	b[58] = (uint8_t)w->comp;
	b[59] = h->sanitize;
	put_le32(b + 60, h->flags);
	put_le64(b + 64, h->generation);
	put_le64(b + 72, h->created ? h->created : (uint64_t)time(NULL));
	put_le32(b + 80, h->num_devices);
	put_le32(b + 84, h->sys_chunk_array_size);
	p = b + BTK_IMG_HEADER_FIXED;
	for (uint32_t i = 0; i < h->num_devices; i++, p += BTK_IMG_DEVICE_SIZE) {
		put_le64(p, h->devices[i].devid);
		put_le64(p + 8, h->devices[i].total_bytes);
		put_le64(p + 16, h->devices[i].bytes_used);
		memcpy(p + 24, h->devices[i].uuid, 16);
	}
	memcpy(p, h->sys_chunk_array, h->sys_chunk_array_size);
	p += h->sys_chunk_array_size;
	put_le64(p, XXH64(b, (size_t)(p - b), 0));
	ret = emit(w, b, n);
	free(b);
	return ret;
}

int btk_writer_open(struct btk_writer **out, int fd, const struct img_header *h, const struct btk_writer_opts *o,
		    char *err, size_t errlen)
{
	struct btk_writer *w = calloc(1, sizeof(*w));
	enum img_compress comp = o->comp;
	unsigned threads = o->threads;
	int ret = -ENOMEM;

	*out = NULL;
	if (!w)
		goto fail;
	if (h->num_devices > BTK_IMG_MAX_DEVICES || h->sys_chunk_array_size > sizeof(h->sys_chunk_array)) {
		ret = -EINVAL;
		snprintf(err, errlen, "too many devices or too large a system chunk array for an image");
		free(w);
		return ret;
	}
	w->fd = fd;
	w->comp = comp;
	w->level = o->level;
	w->frame_raw = o->frame_size ? o->frame_size : BTK_IMG_FRAME_RAW_DEFAULT;
	if (w->frame_raw < BTK_IMG_FRAME_RAW_MIN)
		w->frame_raw = BTK_IMG_FRAME_RAW_MIN;
	if (w->frame_raw > BTK_IMG_FRAME_RAW_MAX)
		w->frame_raw = BTK_IMG_FRAME_RAW_MAX;
	/* measured on a 1.2 GiB-metadata filesystem (doc/image-format.md): chaining and a 1 M-entry
	 * table halve the image; higher levels cost time and gain nothing */
	w->chain = comp == IMG_COMPRESS_ZSTD;
	w->hash_log = BTK_IMG_ZSTD_HASH_LOG;
	for (w->window_log = 20; w->window_log < 27 && ((size_t)1 << w->window_log) < 2 * frame_cap(w);)
		w->window_log++;
	w->nthreads = threads ? threads : 1;
	w->nslots = w->nthreads + 2;
	w->xxh = XXH64_createState();
	w->slots = calloc(w->nslots, sizeof(*w->slots));
	w->threads = calloc(w->nthreads, sizeof(*w->threads));
	if (!w->xxh || !w->slots || !w->threads)
		goto fail;
	XXH64_reset(w->xxh, 0);
	for (unsigned i = 0; i < w->nslots; i++)
		if (!(w->slots[i].raw = malloc(frame_cap(w))))
			goto fail;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->done, NULL);
	for (; w->started < w->nthreads; w->started++)
		if (pthread_create(&w->threads[w->started], NULL, worker_main, w)) {
			ret = -EAGAIN;
			snprintf(err, errlen, "cannot start compression threads");
			goto fail_threads;
		}
	ret = write_header(w, h);
	if (ret) {
		snprintf(err, errlen, "writing the image header: %s", strerror(-ret));
		goto fail_threads;
	}
	*out = w;
	return 0;
fail:
	snprintf(err, errlen, "out of memory");
	if (w) {
		XXH64_freeState(w->xxh);
		for (unsigned i = 0; w->slots && i < w->nslots; i++)
			free(w->slots[i].raw);
		free(w->slots);
		free(w->threads);
		free(w);
	}
	return ret;
fail_threads:
	btk_writer_free(w);
	return ret;
}

static int add_record(struct btk_writer *w, uint16_t type, uint16_t copy, uint64_t logical, const void *data,
		      uint32_t len)
{
	struct frame_slot *s;
	int ret;

	if (len > BTK_IMG_MAX_RECORD)
		return -EINVAL;
	if (w->cur && w->cur->raw_len && w->cur->raw_len + BTK_IMG_RECORD_HEADER + len > w->frame_raw &&
	    (ret = submit_current(w)))
		return ret;
	if (!w->cur && (ret = start_frame(w)))
		return ret;
	s = w->cur;
	put_le64(s->raw + s->raw_len, logical);
	put_le32(s->raw + s->raw_len + 8, len);
	put_le16(s->raw + s->raw_len + 12, type);
	put_le16(s->raw + s->raw_len + 14, copy);
	memcpy(s->raw + s->raw_len + BTK_IMG_RECORD_HEADER, data, len);
	s->raw_len += BTK_IMG_RECORD_HEADER + len;
	s->nrecords++;
	if (type != IMG_REC_SUPER) {
		if (logical < s->first_logical)
			s->first_logical = logical;
		if (logical + len > s->end_logical)
			s->end_logical = logical + len;
	}
	w->totals.records++;
	w->totals.raw_bytes += len;
	if (type == IMG_REC_TREE)
		w->totals.tree_bytes += len;
	else if (type == IMG_REC_DATA)
		w->totals.data_bytes += len;
	else
		w->totals.super_records++;
	return 0;
}

int btk_writer_add(struct btk_writer *w, uint16_t type, uint64_t logical, const void *data, uint32_t len)
{
	return add_record(w, type, 0, logical, data, len);
}

int btk_writer_add_super_copy(struct btk_writer *w, uint64_t devid, unsigned copy, const void *sb)
{
	if (copy < 1 || copy > 2)
		return -EINVAL;
	return add_record(w, IMG_REC_SUPER, (uint16_t)copy, devid, sb, 4096);
}

int btk_writer_finish(struct btk_writer *w, struct img_totals *totals)
{
	uint8_t fixed[BTK_IMG_TRAILER_FIXED], tail[16];
	int ret = submit_current(w);

	while (!ret && w->write_seq < w->fill_seq)
		ret = write_oldest(w);
	if (ret)
		return ret;
	memset(fixed, 0, sizeof(fixed));
	memcpy(fixed, "BEND", 4);
	put_le32(fixed + 4, (uint32_t)w->totals.frames);
	put_le64(fixed + 8, w->totals.records);
	put_le64(fixed + 16, w->totals.raw_bytes);
	put_le64(fixed + 24, w->totals.tree_bytes);
	put_le64(fixed + 32, w->totals.data_bytes);
	put_le64(fixed + 40, w->totals.super_records);
	if ((ret = emit(w, fixed, sizeof(fixed))) || (ret = emit(w, w->index, w->index_len)))
		goto out;
	put_le64(tail, BTK_IMG_TRAILER_FIXED + w->index_len + 16);
	if ((ret = emit(w, tail, 8)))
		goto out;
	put_le64(tail + 8, XXH64_digest(w->xxh));
	ret = img_write_all(w->fd, tail + 8, 8);
	w->offset += 8;
	w->totals.image_bytes = w->offset;
out:
	if (ret && !w->err[0])
		snprintf(w->err, sizeof(w->err), "writing the image trailer: %s", strerror(-ret));
	if (totals)
		*totals = w->totals;
	return ret;
}

const char *btk_writer_error(const struct btk_writer *w)
{
	return w->err[0] ? w->err : "unknown error";
}

void btk_writer_free(struct btk_writer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->started; i++)
		pthread_join(w->threads[i], NULL);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->done);
	for (unsigned i = 0; i < w->nslots; i++) {
		free(w->slots[i].raw);
		free(w->slots[i].out);
	}
	XXH64_freeState(w->xxh);
	free(w->slots);
	free(w->threads);
	free(w->index);
	free(w);
}
