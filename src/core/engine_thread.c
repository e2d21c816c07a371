/* The progress engine's life (engine.h): its creation and end, the
 * optional progress thread (TCPX_P2P_PROGRESS_THREAD) that drives every
 * connection of the session so that callers may post and return, and,
 * without it, the keepalive thread that drives the session whenever the
 * application has not for half a heartbeat interval. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/engine_state.h"
#include "core/pass.h"
#include "core/session.h"
#include "util/error.h"
#include "util/log.h"

/* Set by exit(): the library's threads start no pass any more.  The
 * plugin's static destructors and CUDA's own exit handlers run after ours
 * (registered later, at the first engine, so run earlier), and a pass then
 * would call into what they tear down; passes already under way get a
 * moment to end. */
static int exiting;
static int thread_passes; /* under way in the library's threads */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void on_exit_stop_passes(void)
{
	__atomic_store_n(&exiting, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 1000 && __atomic_load_n(&thread_passes, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
}

/* A forked child has none of the threads whose passes were counted. */
static void forked_child(void)
{
	__atomic_store_n(&thread_passes, 0, __ATOMIC_SEQ_CST);
}

static void register_exit(void)
{
	atexit(on_exit_stop_passes);
	pthread_atfork(NULL, NULL, forked_child);
}

/* A pass of the progress or keepalive thread; false once the process is
 * exiting (no pass was run). */
static bool thread_pass(struct tcpx_p2p_session *s, struct tp_pass_result *st)
{
	bool ran = false;

	__atomic_add_fetch(&thread_passes, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&exiting, __ATOMIC_SEQ_CST)) {
		tp__engine_pass(s, NULL, st);
		ran = true;
	}
	__atomic_sub_fetch(&thread_passes, 1, __ATOMIC_SEQ_CST);
	return ran;
}

static void wait_for_stop(struct tp_engine *e)
{
	pthread_mutex_lock(&e->work_lock);
	while (!e->stop)
		pthread_cond_wait(&e->work_cv, &e->work_lock);
	pthread_mutex_unlock(&e->work_lock);
}

/* Progress until stopped.  While no transfer is pending anywhere in the
 * session, sleep on the work condition (a post wakes it): for ever when
 * the session has no connection, else for the back-off's time, since a
 * peer may announce a write, a read or a send on a control channel at any
 * moment and TCPX moves those bytes only inside test(). */
static void *progress_main(void *arg)
{
	struct tcpx_p2p_session *s = arg;
	struct tp_engine *e = s->engine;
	struct tp_backoff b = { 0 };
	struct tp_pass_result st;
	struct timespec until;
	uint64_t kicks = 0;

	if (tp__session_use_gpu(s))
		TP_WARN("progress", "progress thread: cannot select gpu %d: %s", s->cfg.gpu,
			tcpx_p2p_last_error());
	for (;;) {
		pthread_mutex_lock(&e->work_lock);
		if (e->stop) {
			pthread_mutex_unlock(&e->work_lock);
			break;
		}
		kicks = e->kicks;
		pthread_mutex_unlock(&e->work_lock);
		if (!thread_pass(s, &st)) {
			wait_for_stop(e);
			break;
		}
		if (st.busy || st.pending) {
			tp__backoff(&b, &st);
			continue;
		}
		if (st.moved || b.idle == 0) {
			b.idle = 1;
			b.idle_since = tp__now_ns();
		}
		until = tp__abs_time(tp__now_ns() + tp__backoff_sleep_ns(&b));
		pthread_mutex_lock(&e->work_lock);
		while (!e->stop && e->kicks == kicks) {
			if (!st.conns)
				pthread_cond_wait(&e->work_cv, &e->work_lock);
			else if (pthread_cond_timedwait(&e->work_cv, &e->work_lock, &until))
				break;
		}
		pthread_mutex_unlock(&e->work_lock);
	}
	return NULL;
}

/* Without the progress thread, passes run only while the application
 * drives its session, and so do heartbeats: an application busy elsewhere
 * for the peer's dead_after_ms (setting up GPU memory on a loaded machine,
 * a long computation) would be presumed dead and lose its connections.
 * So this thread runs a pass whenever none has started for half a
 * heartbeat interval: heartbeats go out, the peer's are heard, and
 * whatever else is ready moves.  While the application drives, it only
 * looks at a clock. */
static void *keepalive_main(void *arg)
{
	struct tcpx_p2p_session *s = arg;
	struct tp_engine *e = s->engine;
	int64_t period = (int64_t)s->cfg.heartbeat_ms * TP_NS_PER_MS / 2;
	struct tp_pass_result st;
	struct timespec until;
	bool on_gpu = false, warned = false;

	pthread_mutex_lock(&e->work_lock);
	while (!e->stop) {
		until = tp__abs_time(__atomic_load_n(&e->last_pass_ns, __ATOMIC_RELAXED) + period);
		if (pthread_cond_timedwait(&e->work_cv, &e->work_lock, &until) != ETIMEDOUT ||
		    tp__now_ns() - __atomic_load_n(&e->last_pass_ns, __ATOMIC_RELAXED) < period)
			continue;
		pthread_mutex_unlock(&e->work_lock);
		/* TCPX takes its GPU from the calling thread: no pass on another. */
		if (!on_gpu && !(on_gpu = !tp__session_use_gpu(s)) && !warned) {
			warned = true;
			TP_WARN("progress", "keepalive thread: cannot select gpu %d (no heartbeats "
				"while the application does not drive the session): %s",
				s->cfg.gpu, tcpx_p2p_last_error());
		}
		if (on_gpu && !thread_pass(s, &st)) {
			wait_for_stop(e);
			return NULL;
		}
		if (!on_gpu) /* not before another half interval */
			__atomic_store_n(&e->last_pass_ns, tp__now_ns(), __ATOMIC_RELAXED);
		pthread_mutex_lock(&e->work_lock);
	}
	pthread_mutex_unlock(&e->work_lock);
	return NULL;
}

/* The library's thread, with the caller's asynchronous signals blocked
 * (they are the application's to handle); faults still reach it. */
static int start_thread(struct tp_engine *e, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGABRT);
	sigdelset(&all, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&e->tid, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static void engine_free(struct tp_engine *e)
{
	pthread_cond_destroy(&e->work_cv);
	pthread_mutex_destroy(&e->work_lock);
	pthread_cond_destroy(&e->done_cv);
	pthread_mutex_destroy(&e->done_lock);
	pthread_rwlock_destroy(&e->list_lock);
	free(e);
}

/* The engine's locks and condition variables: 0, or the error of the
 * first that could not be made (nothing left made). */
static int engine_locks_init(struct tp_engine *e)
{
	pthread_rwlockattr_t attr;
	int rc;

	/* Writers (conn create/destroy) must not starve behind a progress
	 * thread that keeps the list read-locked most of the time. */
	rc = pthread_rwlockattr_init(&attr);
	if (rc)
		return rc;
	rc = pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (!rc)
		rc = pthread_rwlock_init(&e->list_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc)
		return rc;
	rc = pthread_mutex_init(&e->done_lock, NULL);
	if (rc)
		goto no_done_lock;
	/* Deadlines come from tp__now_ns(), a CLOCK_MONOTONIC time. */
	rc = tp__cond_init(&e->done_cv);
	if (rc)
		goto no_done_cv;
	rc = pthread_mutex_init(&e->work_lock, NULL);
	if (rc)
		goto no_work_lock;
	rc = tp__cond_init(&e->work_cv);
	if (rc)
		goto no_work_cv;
	return 0;
no_work_cv:
	pthread_mutex_destroy(&e->work_lock);
no_work_lock:
	pthread_cond_destroy(&e->done_cv);
no_done_cv:
	pthread_mutex_destroy(&e->done_lock);
no_done_lock:
	pthread_rwlock_destroy(&e->list_lock);
	return rc;
}

int tp__engine_create(struct tcpx_p2p_session *s)
{
	struct tp_engine *e = calloc(1, sizeof(*e));
	const char *what;
	int rc;

	if (!e)
		return tp__error(TCPX_P2P_ENOMEM, "session_create: out of memory");
	rc = engine_locks_init(e);
	if (rc) {
		free(e);
		return tp__error(TCPX_P2P_ENOMEM, "session_create: cannot create the progress "
				 "engine's locks: %s", strerror(rc));
	}
	s->engine = e;
	e->last_pass_ns = tp__now_ns();
	if (s->cfg.progress_thread)
		e->threaded = true;
	else if (s->cfg.heartbeat_ms > 0)
		e->keepalive = true;
	else
		return 0;
	what = e->threaded ? "progress" : "keepalive";
	e->pid = getpid();
	pthread_once(&exit_once, register_exit);
	rc = start_thread(e, e->threaded ? progress_main : keepalive_main, s);
	if (rc) {
		s->engine = NULL;
		engine_free(e);
		return tp__error(TCPX_P2P_ENOMEM, "session_create: cannot start the %s thread: %s",
				 what, strerror(rc));
	}
	return 0;
}

void tp__engine_destroy(struct tcpx_p2p_session *s)
{
	struct tp_engine *e = s->engine;

	if (!e)
		return;
	/* A forked child has none of its parent's threads (and may hold
	 * copies of locks they held): nothing to stop there. */
	if ((e->threaded || e->keepalive) && e->pid == getpid()) {
		pthread_mutex_lock(&e->work_lock);
		e->stop = true;
		pthread_cond_signal(&e->work_cv);
		pthread_mutex_unlock(&e->work_lock);
		pthread_join(e->tid, NULL);
	}
	s->engine = NULL;
	engine_free(e);
}

