/* Internal header of the tcpx_p2p Python extension (_tcpx_p2p).
 *
 * The extension does not link libtcpx_p2p: the package picks the file
 * (python/tcpx_p2p/_lib.py) and load() resolves every function into
 * tp_api, so that a missing or old library is an ImportError naming the
 * file, not a loader message about an undefined symbol.
 *
 * Every Python object that wraps a handle holds a strong reference to the
 * object it belongs to (an MR or a Conn to its Session, an Xfer to its
 * Conn), so a handle is never freed before the handles that depend on it.
 * Each session also keeps weak lists of its objects, so that close() can
 * release them all in the order the C API requires.  A handle that cannot
 * be released when its Python object goes away (a pending transfer, a
 * region the plugin may still write into) becomes an orphan of its
 * session, released when its connection or the session closes.
 */
#ifndef TP_PY_H
#define TP_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include <tcpx_p2p.h>

/* ---- the library's functions ------------------------------------------- */

#define TP_PY_FUNCS(X)                                                          \
	X(strerror) X(last_error) X(version) X(set_log) X(config_init)          \
	X(config_count) X(config_describe) X(session_create) X(session_destroy) \
	X(session_query) X(session_progress) X(mr_register_ex) X(mr_deregister) \
	X(server_create) X(server_port) X(server_accept) X(server_destroy)      \
	X(dial) X(listen) X(listener_blob) X(connect) X(listener_destroy)       \
	X(conn_destroy) X(conn_barrier) X(send) X(recv) X(sendv) X(recvv)        \
	X(progress) X(test) X(wait) X(wait_any) X(xfer_release) X(mr_export)    \
	X(rmr_import) X(rmr_query) X(rmr_release) X(write) X(read) X(notify)    \
	X(notif_poll) X(mr_unexport) X(conn_stats) X(session_stats)             \
	X(notif_take) X(xfer_query) X(xfer_deadline) X(stream_wait)         \
	X(session_fd) X(completions) X(xfer_cancel)    \
	X(xlist_prepare) X(xlist_prepare_strided) X(xlist_post) X(xlist_release) \
	X(mr_deregister_ex) X(conn_in_deadline) X(conn_hosted) X(session_set_node_id) \
	X(conn_generation)

struct tp_py_api {
#define TP_PY_FIELD(name) __typeof__(&tcpx_p2p_##name) name;
	TP_PY_FUNCS(TP_PY_FIELD)
#undef TP_PY_FIELD
};

extern struct tp_py_api tp_api;
extern int tp_py_loaded;

/* ---- intrusive lists ---------------------------------------------------- */

struct tp_list {
	struct tp_list *prev, *next;
};

static inline void tp_list_init(struct tp_list *l)
{
	l->prev = l->next = l;
}

static inline void tp_list_add(struct tp_list *head, struct tp_list *n)
{
	n->next = head;
	n->prev = head->prev;
	head->prev->next = n;
	head->prev = n;
}

static inline void tp_list_del(struct tp_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	tp_list_init(n);
}

static inline int tp_list_empty(const struct tp_list *l)
{
	return l->next == l;
}

#define tp_list_entry(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))
/* Safe against deleting the current node. */
#define tp_list_each(pos, tmp, head) \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

/* ---- memory taken from a Python object ---------------------------------- */

enum tp_mem_kind { TP_MEM_NONE, TP_MEM_BUFFER, TP_MEM_DLPACK, TP_MEM_REF };

struct tp_mem {
	void *ptr;
	size_t len;
	int cuda;       /* device memory (TCPX_P2P_MEM_CUDA) */
	int readonly;   /* may be sent from, never received into */
	int device;     /* CUDA device the object says it lives on; -1 unknown */
	enum tp_mem_kind kind;
	Py_buffer view; /* TP_MEM_BUFFER */
	void *dlm;      /* TP_MEM_DLPACK: the DLManagedTensor, freed by its deleter */
	PyObject *owner; /* the object the memory came from (kept alive) */
};

int tp_mem_from_object(PyObject *obj, struct tp_mem *m);
void tp_mem_release(struct tp_mem *m);

/* ---- objects ------------------------------------------------------------ */

typedef struct {
	PyObject_HEAD
	tcpx_p2p_session *s; /* NULL once closed */
	int closing;         /* close() is releasing its objects */
	int gpu;
	int progress_thread; /* its config's: a thread drives it */
	int busy;            /* calls of other threads in the library */
	int watched;         /* fileno() was asked for: an event loop may watch it */
	struct tp_list conns, mrs, rmrs, xfers, servers, listeners, xlists;
	struct tp_list orphan_xfers, orphan_mrs;
	PyObject *strings;   /* keeps the config's strings alive */
	PyObject *handles;   /* {xfer handle address: XferObject address} of the
			      * Xfers that hold a handle (completions) */
} SessionObject;

typedef struct {
	PyObject_HEAD
	SessionObject *sess;
	tcpx_p2p_conn *c;    /* NULL once closed */
	int busy;
	int closing;         /* its conn_destroy runs (the GIL let go) */
	struct tp_list link;
} ConnObject;

/* MR and RMR start alike, so a segment list can mark either busy. */
typedef struct {
	PyObject_HEAD
	int busy;
	int remote;
} RegionObject;

typedef struct {
	PyObject_HEAD
	int busy;
	int remote;          /* 0 */
	SessionObject *sess;
	tcpx_p2p_mr *mr;     /* NULL once closed */
	struct tp_mem mem;
	struct tp_list link;
} MRObject;

typedef struct {
	PyObject_HEAD
	int busy;
	int remote;          /* 1 */
	ConnObject *conn;
	tcpx_p2p_rmr *r;     /* NULL once closed */
	size_t len;
	int mem_type;
	unsigned access;
	struct tp_list link;
} RMRObject;

typedef struct {
	PyObject_HEAD
	ConnObject *conn;
	tcpx_p2p_xfer *x;    /* NULL once its result is taken */
	int status;          /* 1 pending, 0 complete, < 0 the error */
	PyObject *detail;    /* the error's detail (str) */
	PyObject *keep;      /* regions used, kept while pending */
	const char *op;
	size_t length;
	int busy;
	uint64_t chunks, chunks_done; /* tcpx_p2p_xfer_query's, kept when the handle goes */
	double deadline;     /* set_deadline's, tp_py_now() seconds; 0: none */
	struct tp_list link;
} XferObject;

/* A prepared WRITE or READ (xlist.c). */
typedef struct {
	PyObject_HEAD
	ConnObject *conn;
	tcpx_p2p_xlist *l;   /* NULL once released */
	PyObject *keep;      /* its local regions (the library holds them) */
	const char *op;
	size_t length;
	int busy;
	struct tp_list link;
} XListObject;

typedef struct {
	PyObject_HEAD
	SessionObject *sess;
	tcpx_p2p_server *srv;
	int busy;
	struct tp_list link;
} ServerObject;

typedef struct {
	PyObject_HEAD
	SessionObject *sess;
	tcpx_p2p_listener *l;
	int busy;
	struct tp_list link;
} ListenerObject;

/* Segments: one region and arrays of offsets and lengths, checked once. */
typedef struct {
	PyObject_HEAD
	RegionObject *region;
	size_t n;
	size_t total;
	void *segs;          /* tcpx_p2p_seg[n] or tcpx_p2p_rseg[n] */
} SegmentsObject;

extern PyTypeObject tp_SessionType, tp_ConnType, tp_MRType, tp_RMRType, tp_XferType,
	tp_ServerType, tp_ListenerType, tp_SegmentsType, tp_XListType;

/* ---- shared helpers ----------------------------------------------------- */

/* Raise the package's exception for a library error code, with the
 * calling thread's tcpx_p2p_last_error() detail.  Returns NULL. */
PyObject *tp_py_raise(int rc, const char *call);
/* The same with a detail given by the caller (a result taken earlier). */
PyObject *tp_py_raise_detail(int rc, const char *call, PyObject *detail);
/* Detail of the last error of this thread, as a str. */
PyObject *tp_py_last_detail(void);

int tp_py_need_lib(void);
/* timeout (seconds, None) -> milliseconds: None gives dflt. -1: error set. */
int tp_py_timeout_ms(PyObject *timeout, int dflt, int *ms);
double tp_py_now(void);

int tp_session_check(SessionObject *s);
int tp_conn_check(ConnObject *c);
/* Release what closed connections and transfers left behind. */
void tp_session_reap(SessionObject *s, ConnObject *closed);
XferObject *tp_xfer_new(ConnObject *conn, tcpx_p2p_xfer *x, PyObject *keep, const char *op,
			size_t length);
/* Session close(): release every xfer of it (their conns are gone). */
void tp_xfer_finalize_all(SessionObject *s);
int tp_xfer_take_result(XferObject *x, int rc);
/* The Xfer holding handle h, or NULL (borrowed). */
XferObject *tp_xfer_of_handle(SessionObject *s, tcpx_p2p_xfer *h);

/* A segment list built for one call. */
struct tp_segset {
	void *segs;   /* tcpx_p2p_seg or tcpx_p2p_rseg array */
	size_t n, total;
	void *owned;  /* malloc'd array, or NULL */
	PyObject *keep; /* list of the regions / Segments used */
};

int tp_segset_build(PyObject *spec, int remote, int writing, ConnObject *conn, const char *call,
		    struct tp_segset *out);
void tp_segset_free(struct tp_segset *set);
void tp_keep_busy(PyObject *keep, int delta);

int tp_py_add_types(PyObject *module);
PyObject *tp_py_wait_any(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *tp_py_set_await(PyObject *mod, PyObject *fn);
/* tcpx_p2p.aio's forget(session), called as a session closes (its fd goes). */
PyObject *tp_py_set_close_hook(PyObject *mod, PyObject *fn);
/* tcpx_p2p.aio.let_go(xfer), called when a thread stops using an Xfer. */
PyObject *tp_py_set_let_go_hook(PyObject *mod, PyObject *fn);

/* Handle releases used by close() and by the session's cascade. */
void tp_conn_close_handle(ConnObject *c);
void tp_xlist_close_handle(XListObject *o);
/* xlist.c: Conn.prepare, Conn.prepare_strided */
PyObject *tp_py_conn_prepare(ConnObject *self, PyObject *args, PyObject *kw);
PyObject *tp_py_conn_prepare_strided(ConnObject *self, PyObject *args, PyObject *kw);
/* gil: let the GIL go meanwhile (not while walking a list of the session) */
int tp_mr_close_handle(MRObject *m, int gil);
void tp_rmr_close_handle(RMRObject *r);
PyObject *tp_conn_new(SessionObject *s, tcpx_p2p_conn *c);
PyObject *tp_mr_new(SessionObject *s, struct tp_mem *m, int pin);
PyObject *tp_busy_error(const char *call, const char *what);
/* stats.c: Session.stats() / Conn.stats() (obj: a tcpx_p2p_session or
 * tcpx_p2p_conn as conn says). */
PyObject *tp_py_stats(void *obj, int conn, const char *call);
void tp_session_orphan_xfer(SessionObject *s, tcpx_p2p_xfer *x, const void *conn, PyObject *keep);
void tp_session_orphan_mr(SessionObject *s, tcpx_p2p_mr *mr, struct tp_mem *mem);

/* Method tables: a function of any signature, and keyword arguments. */
#define TP_PY_FN(f) ((PyCFunction)(void (*)(void))(f))
#define TP_PY_KW (METH_VARARGS | METH_KEYWORDS)
/* __enter__ of the objects that close on __exit__: returns self. */
PyObject *tp_py_enter_self(PyObject *self, PyObject *unused);

/* Mark objects in use while the GIL is released for a library call. */
#define TP_ENTER(o) ((o)->busy++)
#define TP_LEAVE(o) ((o)->busy--)

#endif
