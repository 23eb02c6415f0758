// SPDX-License-Identifier: LGPL-2.1-or-later
/* Slots read ahead by worker threads, consumed in order (see read_pipe.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <btk/read_pipe.h>

struct read_pipe {
	struct read_slot *slots;
	bool *done;
	unsigned nslots, nsegs, nthreads;
	uint64_t head, claimed, tail;   /* released <= head <= claimed <= tail (counts, not indexes) */
	bool filling;                   /* read_pipe_fill handed out slot tail */
	bool stop;
	pthread_mutex_t lock;
	pthread_cond_t work, finished;
	pthread_t *threads;
};

static void read_slot_segs(struct read_pipe *p, struct read_slot *s, bool direct)
{
	for (unsigned i = 0; i < p->nsegs; i++) {
		struct read_seg *g = &s->seg[i];
		if (g->io)
			g->ret = direct ? io_read_direct(g->io, g->buf, g->len, g->offset)
					: io_read(g->io, g->buf, g->len, g->offset);
	}
}

static void *worker(void *arg)
{
	struct read_pipe *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		unsigned i;
		while (!p->stop && p->claimed == p->tail)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stop)
			break;
		i = (unsigned)(p->claimed++ % p->nslots);
		pthread_mutex_unlock(&p->lock);
		read_slot_segs(p, &p->slots[i], true);
		pthread_mutex_lock(&p->lock);
		p->done[i] = true;
		pthread_cond_broadcast(&p->finished);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int read_pipe_create(unsigned nslots, unsigned nsegs, size_t seg_max, unsigned nthreads, struct read_pipe **out)
{
	struct read_pipe *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	if (nslots == 0 || nsegs == 0 || nsegs > READ_PIPE_MAX_SEGS) {
		free(p);
		return -EINVAL;
	}
	p->nslots = nslots;
	p->nsegs = nsegs;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->finished, NULL);
	p->slots = calloc(nslots, sizeof(*p->slots));
	p->done = calloc(nslots, sizeof(*p->done));
	p->threads = calloc(nthreads ? nthreads : 1, sizeof(*p->threads));
	if (!p->slots || !p->done || !p->threads)
		goto nomem;
	for (unsigned s = 0; s < nslots; s++) {
		p->slots[s].index = s;
		for (unsigned i = 0; i < nsegs; i++)
			if (posix_memalign((void **)&p->slots[s].seg[i].buf, IO_DIRECT_ALIGN, seg_max))
				goto nomem;
	}
	for (unsigned t = 0; t < nthreads; t++) {
		if (pthread_create(&p->threads[t], NULL, worker, p))
			break;   /* fewer threads (or none) still work */
		p->nthreads++;
	}
	*out = p;
	return 0;
nomem:
	read_pipe_destroy(p);
	return -ENOMEM;
}

void read_pipe_destroy(struct read_pipe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned t = 0; t < p->nthreads; t++)
		pthread_join(p->threads[t], NULL);
	for (unsigned s = 0; p->slots && s < p->nslots; s++)
		for (unsigned i = 0; i < p->nsegs; i++)
			free(p->slots[s].seg[i].buf);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->finished);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p->done);
	free(p->slots);
	free(p);
}

struct read_slot *read_pipe_fill(struct read_pipe *p)
{
	struct read_slot *s;

	if (p->tail - p->head >= p->nslots)
		return NULL;
	s = &p->slots[p->tail % p->nslots];
	for (unsigned i = 0; i < p->nsegs; i++) {
		s->seg[i].io = NULL;
		s->seg[i].len = 0;
		s->seg[i].ret = 0;
	}
	p->filling = true;
	return s;
}

void read_pipe_submit(struct read_pipe *p)
{
	struct read_slot *s = &p->slots[p->tail % p->nslots];

	if (!p->filling)
		return;
	p->filling = false;
	if (!p->nthreads) {
		/* read on the caller's thread later: let the device start now */
		for (unsigned i = 0; i < p->nsegs; i++)
			if (s->seg[i].io)
				io_prefetch(s->seg[i].io, s->seg[i].offset, s->seg[i].len);
		p->tail++;
		return;
	}
	pthread_mutex_lock(&p->lock);
	p->done[p->tail % p->nslots] = false;
	p->tail++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
}

struct read_slot *read_pipe_next(struct read_pipe *p)
{
	struct read_slot *s;
	unsigned i;

	if (p->head == p->tail)
		return NULL;
	i = (unsigned)(p->head % p->nslots);
	s = &p->slots[i];
	if (!p->nthreads) {
		read_slot_segs(p, s, false);
		return s;
	}
	pthread_mutex_lock(&p->lock);
	while (!p->done[i])
		pthread_cond_wait(&p->finished, &p->lock);
	pthread_mutex_unlock(&p->lock);
	/* a device or file system without O_DIRECT (or a failed read): through the cache */
	for (unsigned g = 0; g < p->nsegs; g++)
		if (s->seg[g].io && s->seg[g].ret)
			s->seg[g].ret = io_read(s->seg[g].io, s->seg[g].buf, s->seg[g].len, s->seg[g].offset);
	return s;
}

void read_pipe_release(struct read_pipe *p)
{
	if (p->head < p->tail)
		p->head++;
}
