/* The module msprobe_dask.graph._speedups: its functions and the texts they use. */
#include "speedups.h"

PyObject *exported_text_type, *orjson_dumps, *crc32_text, *zero, *str_max, *str_type, *str_process_group,
    *str_shape, *str_class, *str_true, *str_false, *str_data_name, *str_full_op_name, *str_state,
    *str_requires_grad, *str_dtype, *str_md5, *str_value, *str_no_data_name, *str_id, *str_parent,
    *str_children, *str_stack, *str_precision, *str_overflow, *str_micro, *str_link, *str_merge_info,
    *str_input_data, *str_output_data, *str_type_attr, *str_batch_p2p, *str_distributed, *str_empty,
    *str_empty_map, *str_output_part, *str_int_type, *str_float_type, *str_no_shape, *str_class_type,
    *str_p2p_class, *str_input_part, *str_backward_part;
PyObject *stat_names[4], *state_names[5], *written_keys[N_WRITTEN], *rank_params[4], *shaped_kinds[4],
    *sub_keys[5], *sub_suffixes[5], *sub_states[5];

int configured(void) {
    if (exported_text_type != NULL && orjson_dumps != NULL && crc32_text != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "_speedups.configure() was not called");
    return -1;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *exported, *dumps, *crc32;
    if (!PyArg_ParseTuple(args, "O!OO", &PyType_Type, &exported, &dumps, &crc32))
        return NULL;
    Py_XSETREF(crc32_text, Py_NewRef(crc32));
    Py_XSETREF(exported_text_type, Py_NewRef(exported));
    Py_XSETREF(orjson_dumps, Py_NewRef(dumps));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(ExportedText, orjson.dumps, _crc32): ready texts, the float writer, md5 of scalars."},
    {"items_json", items_json, METH_VARARGS,
     "items_json(data, skip): the JSON text of a node's exported items, or None."},
    {"entry_items", entry_items, METH_VARARGS,
     "entry_items(node_id, entry, crc_empty, python_leaf): split_items(parse_entry(...)), or None."},
    {"node_rows", node_rows, METH_VARARGS,
     "node_rows(nodes, start, how, stacks, p2p): rows.chunk_rows' rows."},
    {"leaf", leaf, METH_VARARGS, "leaf(leaf, name, state, crc_empty): items._leaf for a tensor, or None."},
    {"summary_pair", summary_pair, METH_VARARGS, "summary_pair(npu_in, npu_out, bench_in, bench_out, how)."},
    {"stat_diffs", stat_diffs, METH_VARARGS, "stat_diffs(ns, bs, stat_diff): compare._diffs."},
    {"parse_items", parse_items, METH_VARARGS,
     "parse_items(nodes, root, collection, spans, small, text, loads, python_items, python_entry_items, "
     "crc_empty, python_leaf): build.parse_items."},
    {"entry_texts", entry_texts, METH_VARARGS,
     "entry_texts(text, start, end, node_id): the exported items' JSON texts of an entry, or None."},
    {"node_texts", node_texts, METH_VARARGS,
     "node_texts(nodes, root, collection, spans, small, text): entry_texts of each node's entry, "
     "or None."},
    {"tree_post_order", tree_post_order, METH_VARARGS,
     "tree_post_order(root, limit): Graph._tree_post_order's nodes, or None."},
    {"number_stacks", number_stacks, METH_VARARGS, "number_stacks(nodes, dumps): rows.number_stacks' (of_list, first)."},
    {"propagate_micro", propagate_micro, METH_VARARGS,
     "propagate_micro(node, max_depth): build._propagate; the node too deep, or None."},
    {"attach_all", attach_all, METH_VARARGS, "attach_all(construct, nodes, root, how): build._attach_all."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

/* the interned texts the code compares with and writes */
static const struct {
    PyObject **var;
    const char *text;
} constants[] = {
    {&str_max, "Max"}, {&str_type, "type"}, {&str_process_group, "torch.ProcessGroup"}, {&str_true, "True"},
    {&str_false, "False"}, {&str_data_name, "data_name"}, {&str_full_op_name, "full_op_name"},
    {&str_state, "state"}, {&str_requires_grad, "requires_grad"}, {&str_dtype, "dtype"}, {&str_md5, "md5"},
    {&str_value, "value"}, {&str_no_data_name, "-1"}, {&str_output_part, ".output."}, {&str_shape, "shape"},
    {&str_class, "class"}, {&str_class_type, "class_type"}, {&str_p2p_class, "torch.distributed.P2POp"},
    {&str_input_part, ".input."}, {&str_backward_part, ".backward"}, {&str_int_type, "<class 'int'>"}, {&str_float_type, "<class 'float'>"},
    {&str_no_shape, "[]"},
    /* Node attributes, and texts of rows */
    {&str_id, "id"}, {&str_parent, "parent"}, {&str_children, "children"}, {&str_stack, "stack"},
    {&str_precision, "precision"}, {&str_overflow, "overflow"}, {&str_micro, "micro"}, {&str_link, "link"},
    {&str_merge_info, "merge_info"}, {&str_input_data, "input_data"}, {&str_output_data, "output_data"},
    {&str_type_attr, "type"}, {&str_batch_p2p, "batch_isend_irecv"}, {&str_distributed, "Distributed"},
    {&str_empty, ""}, {&str_empty_map, "{}"},
    /* compare.STATE_GROUPS' states */
    {&state_names[0], "input"}, {&state_names[1], "kwargs"}, {&state_names[2], "parameters"},
    {&state_names[3], "output"}, {&state_names[4], "parameters_grad"},
    /* compare.WRITE_BACK[SUMMARY] */
    {&written_keys[0], "Max diff"}, {&written_keys[1], "Min diff"}, {&written_keys[2], "Mean diff"},
    {&written_keys[3], "L2norm diff"}, {&written_keys[4], "MaxRelativeErr"},
    {&written_keys[5], "MinRelativeErr"}, {&written_keys[6], "MeanRelativeErr"},
    {&written_keys[7], "NormRelativeErr"}, {&written_keys[8], "Requires_grad Consistent"},
    {&written_keys[9], "Result"}, {&written_keys[10], "Err_message"},
    /* items.SUB_KEYS: keys, name suffixes, states */
    {&sub_keys[0], "input_args"}, {&sub_keys[1], "input_kwargs"}, {&sub_keys[2], "input"},
    {&sub_keys[3], "output"}, {&sub_keys[4], "parameters"}, {&sub_suffixes[0], ".input"},
    {&sub_suffixes[1], ".input"}, {&sub_suffixes[2], ".input"}, {&sub_suffixes[3], ".output"},
    {&sub_suffixes[4], ".parameters"}, {&sub_states[0], "input"}, {&sub_states[1], "input"},
    {&sub_states[2], "input"}, {&sub_states[3], "output"}, {&sub_states[4], "parameters"},
    /* items.RANK_PARAMS, and the kinds items._fill_non_tensor treats apart */
    {&rank_params[0], "src"}, {&rank_params[1], "dst"}, {&rank_params[2], "group_src"},
    {&rank_params[3], "group_dst"}, {&shaped_kinds[0], "torch.Size"}, {&shaped_kinds[1], "slice"},
    {&shaped_kinds[2], "ellipsis"}, {&shaped_kinds[3], "torch.ProcessGroup"},
    {&stat_names[0], "Max"}, {&stat_names[1], "Min"}, {&stat_names[2], "Mean"}, {&stat_names[3], "Norm"},
};

PyMODINIT_FUNC PyInit__speedups(void) {
    init_char_classes();
    init_entry_text();
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
        if ((*constants[i].var = PyUnicode_InternFromString(constants[i].text)) == NULL)
            return NULL;
    if ((zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", SPEEDUPS_API) < 0)
        Py_CLEAR(m);
    return m;
}
