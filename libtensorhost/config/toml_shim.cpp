// toml++ behind a C interface: parse, then copy the document into the plain
// tree of toml_shim.h. Memory of the tree comes from malloc, so the C side
// never sees a C++ allocation; nothing here lets an exception escape.
#include "config/toml_shim.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace {

// GLib's policy: running out of memory ends the program rather than being
// reported, which keeps every caller free of allocation-failure paths.
void *checked_alloc(size_t size)
{
    void *memory = std::calloc(1, size ? size : 1);
    if (!memory)
        std::abort();
    return memory;
}

char *copy_bytes(const char *bytes, size_t length)
{
    char *copy = static_cast<char *>(checked_alloc(length + 1));
    if (length)
        std::memcpy(copy, bytes, length);
    copy[length] = '\0';
    return copy;
}

char *copy_string(std::string_view text)
{
    return copy_bytes(text.data(), text.size());
}

th_toml_node *node_new(th_toml_kind kind, const char *type_name)
{
    th_toml_node *node = static_cast<th_toml_node *>(checked_alloc(sizeof *node));
    node->kind = kind;
    node->type_name = type_name;
    return node;
}

void node_append(th_toml_node *parent, th_toml_node *child)
{
    if (parent->n_children == parent->children_capacity) {
        size_t capacity = parent->children_capacity ? 2 * parent->children_capacity : 4;
        void *grown = std::realloc(parent->children, capacity * sizeof *parent->children);
        if (!grown)
            std::abort();
        parent->children = static_cast<th_toml_node **>(grown);
        parent->children_capacity = capacity;
    }
    parent->children[parent->n_children++] = child;
}

template <typename T>
char *render_with_stream(const T &value)
{
    std::ostringstream out;
    out << value;
    return copy_string(out.str());
}

// toml++ caps array/inline-table nesting, but dotted keys and table headers
// can still nest as deep as the input is long; the copy recurses, so it
// refuses documents that no config schema could ever accept anyway.
constexpr int max_depth = 200;

struct too_deep {
    toml::source_position where;
};

// Owns a subtree while it is being built, so a throw frees it.
struct node_deleter {
    void operator()(th_toml_node *node) const { th_toml_node_free(node); }
};
using node_ptr = std::unique_ptr<th_toml_node, node_deleter>;

node_ptr convert(const toml::node &source, int depth);

node_ptr convert_table(const toml::table &table, int depth)
{
    node_ptr node(node_new(TH_TOML_TABLE, "table"));
    for (auto &&[key, value] : table) {
        node_ptr child = convert(value, depth + 1);
        child->key = copy_string(key.str());
        child->key_line = key.source().begin.line;
        child->key_column = key.source().begin.column;
        node_append(node.get(), child.release());
    }
    // toml::table is a std::map (sorted by key); messages and option order
    // follow the file, so restore the order in which the keys were written.
    std::stable_sort(node->children, node->children + node->n_children,
                     [](const th_toml_node *a, const th_toml_node *b) {
                         if (a->key_line != b->key_line)
                             return a->key_line < b->key_line;
                         return a->key_column < b->key_column;
                     });
    return node;
}

th_toml_node *convert_scalar(const toml::node &source)
{
    th_toml_node *node = nullptr;
    switch (source.type()) {
    case toml::node_type::string: {
        const std::string &text = source.as_string()->get();
        node = node_new(TH_TOML_STRING, "string");
        node->string_value = copy_string(text);
        node->string_length = text.size();
        break;
    }
    case toml::node_type::integer:
        node = node_new(TH_TOML_INTEGER, "integer");
        node->integer_value = source.as_integer()->get();
        break;
    case toml::node_type::floating_point:
        node = node_new(TH_TOML_FLOAT, "float");
        node->float_value = source.as_floating_point()->get();
        break;
    case toml::node_type::boolean:
        node = node_new(TH_TOML_BOOLEAN, "boolean");
        node->boolean_value = source.as_boolean()->get() ? 1 : 0;
        break;
    case toml::node_type::date:
        node = node_new(TH_TOML_UNSUPPORTED, "date");
        node->string_value = render_with_stream(*source.as_date());
        break;
    case toml::node_type::time:
        node = node_new(TH_TOML_UNSUPPORTED, "time");
        node->string_value = render_with_stream(*source.as_time());
        break;
    case toml::node_type::date_time:
        node = node_new(TH_TOML_UNSUPPORTED, "date-time");
        node->string_value = render_with_stream(*source.as_date_time());
        break;
    default: // none, table, array: handled by the caller
        node = node_new(TH_TOML_UNSUPPORTED, "unknown type");
        node->string_value = copy_string("?");
        break;
    }
    if (node->kind == TH_TOML_UNSUPPORTED)
        node->string_length = std::strlen(node->string_value);
    return node;
}

node_ptr convert(const toml::node &source, int depth)
{
    if (depth > max_depth)
        throw too_deep{source.source().begin};
    node_ptr node;
    if (const toml::table *table = source.as_table()) {
        node = convert_table(*table, depth);
    } else if (const toml::array *array = source.as_array()) {
        node.reset(node_new(TH_TOML_ARRAY, "array"));
        for (const toml::node &element : *array)
            node_append(node.get(), convert(element, depth + 1).release());
    } else {
        node.reset(convert_scalar(source));
    }
    node->line = source.source().begin.line;
    node->column = source.source().begin.column;
    return node;
}

void fill_error(th_toml_error *error, const char *message, uint32_t line, uint32_t column)
{
    if (!error)
        return;
    error->message = copy_string(message);
    error->line = line;
    error->column = column;
}

} // namespace

extern "C" {

th_toml_node *th_toml_parse(const char *text, size_t length, th_toml_error *error)
{
    if (error)
        *error = th_toml_error{};
    std::string_view document(text ? text : "", text ? length : 0);
    try {
#if TOML_EXCEPTIONS
        toml::table root = toml::parse(document);
#else
        toml::parse_result result = toml::parse(document);
        if (!result) {
            const toml::parse_error &failure = result.error();
            fill_error(error, std::string(failure.description()).c_str(),
                       failure.source().begin.line, failure.source().begin.column);
            return nullptr;
        }
        toml::table root = std::move(result).table();
#endif
        node_ptr tree = convert_table(root, 0);
        tree->line = tree->column = 1;
        return tree.release();
#if TOML_EXCEPTIONS
    } catch (const toml::parse_error &failure) {
        fill_error(error, std::string(failure.description()).c_str(),
                   failure.source().begin.line, failure.source().begin.column);
#endif
    } catch (const too_deep &failure) {
        std::string message = "tables nested deeper than " + std::to_string(max_depth) + " levels";
        fill_error(error, message.c_str(), failure.where.line, failure.where.column);
    } catch (const std::exception &failure) {
        fill_error(error, failure.what(), 0, 0);
    } catch (...) {
        fill_error(error, "unexpected failure in the TOML parser", 0, 0);
    }
    return nullptr;
}

th_toml_node *th_toml_parse_value(const char *text, int *was_bare)
{
    std::string document = "v = ";
    document += text;
    th_toml_node *root = th_toml_parse(document.data(), document.size(), nullptr);
    // Exactly one key, `v`, or the text was not one value: "1\nx = 2" must
    // not smuggle a second key in.
    if (root && root->n_children == 1 && std::strcmp(root->children[0]->key, "v") == 0) {
        th_toml_node *value = root->children[0];
        root->n_children = 0;
        th_toml_node_free(root);
        std::free(value->key);
        value->key = nullptr;
        value->line = value->column = value->key_line = value->key_column = 0;
        if (was_bare)
            *was_bare = 0;
        return value;
    }
    th_toml_node_free(root);
    if (was_bare)
        *was_bare = 1;
    return th_toml_string_new(text);
}

void th_toml_error_clear(th_toml_error *error)
{
    if (!error)
        return;
    std::free(error->message);
    *error = th_toml_error{};
}

void th_toml_node_free(th_toml_node *node)
{
    if (!node)
        return;
    for (size_t i = 0; i < node->n_children; i++)
        th_toml_node_free(node->children[i]);
    std::free(node->children);
    std::free(node->key);
    std::free(node->string_value);
    std::free(node->origin);
    std::free(node);
}

th_toml_node *th_toml_table_new(const char *key)
{
    th_toml_node *table = node_new(TH_TOML_TABLE, "table");
    if (key)
        table->key = copy_string(key);
    return table;
}

th_toml_node *th_toml_array_new(void)
{
    return node_new(TH_TOML_ARRAY, "array");
}

th_toml_node *th_toml_string_new(const char *text)
{
    th_toml_node *node = node_new(TH_TOML_STRING, "string");
    node->string_value = copy_string(text);
    node->string_length = std::strlen(text);
    return node;
}

void th_toml_array_append(th_toml_node *array, th_toml_node *element)
{
    node_append(array, element);
}

th_toml_node *th_toml_table_find(const th_toml_node *table, const char *key)
{
    if (!table || table->kind != TH_TOML_TABLE)
        return nullptr;
    for (size_t i = 0; i < table->n_children; i++) {
        if (std::strcmp(table->children[i]->key, key) == 0)
            return table->children[i];
    }
    return nullptr;
}

void th_toml_table_put(th_toml_node *table, th_toml_node *child)
{
    for (size_t i = 0; i < table->n_children; i++) {
        if (std::strcmp(table->children[i]->key, child->key) == 0) {
            th_toml_node_free(table->children[i]);
            table->children[i] = child;
            return;
        }
    }
    node_append(table, child);
}

void th_toml_node_set_key(th_toml_node *node, const char *key)
{
    std::free(node->key);
    node->key = key ? copy_string(key) : nullptr;
}

void th_toml_node_set_origin(th_toml_node *node, const char *origin)
{
    std::free(node->origin);
    node->origin = origin ? copy_string(origin) : nullptr;
    for (size_t i = 0; i < node->n_children; i++)
        th_toml_node_set_origin(node->children[i], origin);
}

} // extern "C"
