/* The _tcpx_p2p module: loading the library, errors, module functions. */
#include <dlfcn.h>
#include <time.h>

#include "tp_py.h"

struct tp_py_api tp_api;
int tp_py_loaded;
static void *lib_handle;
static PyObject *lib_path;   /* str: the file loaded */
static PyObject *err_map;    /* {code: exception class}, set by the package */
static PyObject *err_base;   /* tcpx_p2p.Error */

int tp_py_need_lib(void)
{
	if (tp_py_loaded)
		return 0;
	PyErr_SetString(PyExc_RuntimeError, "tcpx_p2p: the library is not loaded");
	return -1;
}

double tp_py_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int tp_py_timeout_ms(PyObject *timeout, int dflt, int *ms)
{
	double t;

	if (!timeout || timeout == Py_None) {
		*ms = dflt;
		return 0;
	}
	t = PyFloat_AsDouble(timeout);
	if (t == -1.0 && PyErr_Occurred())
		return -1;
	if (t < 0 || t != t) {
		PyErr_SetString(PyExc_ValueError, "timeout must be >= 0 seconds (or None)");
		return -1;
	}
	*ms = t * 1000.0 >= (double)INT32_MAX ? INT32_MAX : (int)(t * 1000.0 + 0.5);
	return 0;
}

PyObject *tp_py_last_detail(void)
{
	const char *d = tp_api.last_error ? tp_api.last_error() : "";

	return PyUnicode_DecodeUTF8(d, (Py_ssize_t)strlen(d), "replace");
}

PyObject *tp_py_raise_detail(int rc, const char *call, PyObject *detail)
{
	PyObject *cls = NULL, *key, *exc;

	if (err_map) {
		key = PyLong_FromLong(rc);
		if (!key)
			return NULL;
		cls = PyDict_GetItemWithError(err_map, key);
		Py_DECREF(key);
		if (!cls && PyErr_Occurred())
			return NULL;
	}
	if (!cls)
		cls = err_base ? err_base : PyExc_RuntimeError;
	exc = PyObject_CallFunction(cls, "iOs", rc, detail ? detail : Py_None, call);
	if (!exc)
		return NULL;
	PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
	Py_DECREF(exc);
	return NULL;
}

PyObject *tp_py_enter_self(PyObject *self, PyObject *unused)
{
	Py_INCREF(self);
	return self;
}

PyObject *tp_py_raise(int rc, const char *call)
{
	PyObject *detail = tp_py_last_detail();

	if (!detail)
		return NULL;
	tp_py_raise_detail(rc, call, detail);
	Py_DECREF(detail);
	return NULL;
}

/* load(path) -> version: dlopen the library and resolve every function. */
static PyObject *mod_load(PyObject *self, PyObject *args)
{
	struct tp_py_api api;
	const char *path;
	void *h;

	if (!PyArg_ParseTuple(args, "s:load", &path))
		return NULL;
	if (tp_py_loaded) {
		if (PyUnicode_CompareWithASCIIString(lib_path, path) == 0)
			return PyUnicode_FromString(tp_api.version());
		return PyErr_Format(PyExc_RuntimeError, "tcpx_p2p: %U is loaded already; a process "
				    "uses one library", lib_path);
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return PyErr_Format(PyExc_OSError, "%s", dlerror());
#define TP_PY_RESOLVE(name)                                                         \
	*(void **)&api.name = dlsym(h, "tcpx_p2p_" #name);                         \
	if (!api.name) {                                                            \
		dlclose(h);                                                         \
		return PyErr_Format(PyExc_OSError, "%s has no tcpx_p2p_" #name      \
				    ": a library older than the package's %s", path, \
				    TCPX_P2P_VERSION_STRING);                       \
	}
	TP_PY_FUNCS(TP_PY_RESOLVE)
#undef TP_PY_RESOLVE
	lib_path = PyUnicode_FromString(path);
	if (!lib_path) {
		dlclose(h);
		return NULL;
	}
	tp_api = api;
	lib_handle = h;
	tp_py_loaded = 1;
	return PyUnicode_FromString(tp_api.version());
}

static PyObject *mod_library_path(PyObject *self, PyObject *unused)
{
	if (!lib_path)
		Py_RETURN_NONE;
	Py_INCREF(lib_path);
	return lib_path;
}

/* _set_errors(base, {code: class}): the package's exception classes. */
static PyObject *mod_set_errors(PyObject *self, PyObject *args)
{
	PyObject *base, *map;

	if (!PyArg_ParseTuple(args, "OO!:_set_errors", &base, &PyDict_Type, &map))
		return NULL;
	Py_INCREF(base);
	Py_INCREF(map);
	Py_XSETREF(err_base, base);
	Py_XSETREF(err_map, map);
	Py_RETURN_NONE;
}

static PyObject *mod_strerror(PyObject *self, PyObject *args)
{
	int code;

	if (!PyArg_ParseTuple(args, "i:strerror", &code) || tp_py_need_lib())
		return NULL;
	return PyUnicode_FromString(tp_api.strerror(code));
}

static PyObject *mod_version(PyObject *self, PyObject *unused)
{
	if (tp_py_need_lib())
		return NULL;
	return PyUnicode_FromString(tp_api.version());
}

/* config_table() -> [(env_name, value, help)]: the settings as the
 * environment makes them (tcpx_p2p_config_describe of config_init). */
static PyObject *mod_config_table(PyObject *self, PyObject *unused)
{
	tcpx_p2p_config cfg;
	const char *name, *help;
	char value[512];
	PyObject *list, *row;
	int i, n, rc;

	if (tp_py_need_lib())
		return NULL;
	tp_api.config_init(&cfg); /* a malformed variable keeps its default here */
	n = tp_api.config_count();
	list = PyList_New(0);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++) {
		rc = tp_api.config_describe(&cfg, i, &name, &help, value, sizeof(value));
		if (rc) {
			Py_DECREF(list);
			return tp_py_raise(rc, "config_describe");
		}
		row = Py_BuildValue("(sss)", name, value, help);
		if (!row || PyList_Append(list, row)) {
			Py_XDECREF(row);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(row);
	}
	return list;
}

static PyObject *mod_set_log_level(PyObject *self, PyObject *args)
{
	int level, rc;

	if (!PyArg_ParseTuple(args, "i:set_log_level", &level) || tp_py_need_lib())
		return NULL;
	rc = tp_api.set_log(NULL, NULL, level);
	if (rc)
		return tp_py_raise(rc, "set_log_level");
	Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
	{ "load", mod_load, METH_VARARGS, "load(path) -> version: load libtcpx_p2p from path" },
	{ "library_path", mod_library_path, METH_NOARGS, "the file the library was loaded from" },
	{ "_set_errors", mod_set_errors, METH_VARARGS, NULL },
	{ "_set_await", tp_py_set_await, METH_O, NULL },
	{ "_set_close_hook", tp_py_set_close_hook, METH_O, NULL },
	{ "_set_let_go_hook", tp_py_set_let_go_hook, METH_O, NULL },
	{ "wait_any", (PyCFunction)(void (*)(void))tp_py_wait_any, METH_VARARGS | METH_KEYWORDS,
	  "wait_any(xfers, timeout=None) -> int: wait (GIL released) until one of the xfers "
	  "(of one session) completes or fails; its index. Its wait()/test() then gives the "
	  "result. Raises TimedOut after timeout seconds." },
	{ "strerror", mod_strerror, METH_VARARGS, "strerror(code) -> str" },
	{ "version", mod_version, METH_NOARGS, "version of the loaded library" },
	{ "config_table", mod_config_table, METH_NOARGS,
	  "config_table() -> [(env_name, value, help)] as the environment sets them" },
	{ "set_log_level", mod_set_log_level, METH_VARARGS,
	  "set_log_level(level): 0 none .. 4 trace; messages go to stderr" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT, "_tcpx_p2p",
	"C extension of the tcpx_p2p package; use the package, not this module.", -1,
	mod_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tcpx_p2p(void);

PyMODINIT_FUNC PyInit__tcpx_p2p(void)
{
	PyObject *m = PyModule_Create(&moddef);

	if (!m)
		return NULL;
	if (tp_py_add_types(m) ||
	    PyModule_AddStringConstant(m, "HEADER_VERSION", TCPX_P2P_VERSION_STRING) ||
	    PyModule_AddIntConstant(m, "RDESC_SIZE", TCPX_P2P_RDESC_SIZE) ||
	    PyModule_AddIntConstant(m, "NOTIF_MAX", TCPX_P2P_NOTIF_MAX) ||
	    PyModule_AddIntConstant(m, "NOTIF_LIMIT", TCPX_P2P_NOTIF_LIMIT) ||
	    PyModule_AddIntConstant(m, "ACCESS_WRITE", TCPX_P2P_ACCESS_WRITE) ||
	    PyModule_AddIntConstant(m, "ACCESS_READ", TCPX_P2P_ACCESS_READ) ||
	    PyModule_AddIntConstant(m, "MAX_CHANNELS", TCPX_P2P_MAX_CHANNELS)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
