#include "compile/control_flow.h"

#include <c10/util/Exception.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace torch_tpu::compile {

namespace {

using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

V operands(Lowerer& lw, const py::handle& refs, const std::string& op) {
  V out;
  for (py::handle r : refs) {
    TORCH_CHECK_NOT_IMPLEMENTED(py::isinstance<py::tuple>(r) && py::len(r) == 1, "torch_tpu: ", op,
                                " in a compiled graph takes tensors only");
    out.push_back(lw.value(r.cast<py::tuple>()[0].cast<int>(), op));
  }
  return out;
}

std::vector<TensorType> types_of(const V& values) {
  std::vector<TensorType> types;
  for (const Value& v : values) types.push_back(v.type);
  return types;
}

V concat(V a, const V& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

V range(const V& v, size_t begin, size_t end) { return V(v.begin() + begin, v.begin() + end); }

// Branch 1 is true_fn, branch 0 false_fn. The branches read the operands from the
// enclosing scope (case regions take no arguments).
V lower_cond(Lowerer& lw, const py::list& args, const std::vector<TensorType>& outs) {
  hlo::Builder& b = lw.b;
  TORCH_CHECK_NOT_IMPLEMENTED(py::isinstance<py::tuple>(args[0]),
                              "torch_tpu: cond in a compiled "
                              "graph needs a tensor predicate");
  Value pred = operands(lw, py::make_tuple(args[0]), "cond")[0];
  TORCH_CHECK(pred.type.numel() == 1, "torch_tpu: cond's predicate has ", pred.type.numel(),
              " elements, expected one");
  Value index = b.convert(b.reshape(pred, {}), DType::S32);
  V in = operands(lw, args[3], "cond");
  auto branch = [&](const py::handle& spec) {
    return b.region({}, [&](hlo::Builder& r, const V&) { return lower_subgraph(r, spec, in); });
  };
  return b.emit_multi("stablehlo.case", {index}, "", outs, {branch(args[2]), branch(args[1])});
}

// Every value the body reads is a loop-carried value (while regions see only their
// arguments); the extra inputs are carried unchanged.
V lower_while(Lowerer& lw, const py::list& args) {
  hlo::Builder& b = lw.b;
  V carried = operands(lw, args[2], "while_loop"), extra = operands(lw, args[3], "while_loop");
  V state = concat(carried, extra);
  std::vector<TensorType> types = types_of(state);
  py::handle cond_spec = args[0], body_spec = args[1];
  std::string cond = b.region(types, [&](hlo::Builder& r, const V& a) {
    V p = lower_subgraph(r, cond_spec, a);
    TORCH_CHECK(p.size() == 1 && p[0].type.numel() == 1 && p[0].type.dtype == DType::Pred,
                "torch_tpu: while_loop's cond_fn must return one boolean scalar tensor");
    return V{r.reshape(p[0], {})};
  });
  std::string body = b.region(types, [&](hlo::Builder& r, const V& a) {
    V next = lower_subgraph(r, body_spec, a);
    TORCH_CHECK(next.size() == carried.size(), "torch_tpu: while_loop's body_fn returns ",
                next.size(), " values for ", carried.size(), " carried ones");
    for (size_t i = 0; i < next.size(); ++i)
      TORCH_CHECK(next[i].type == carried[i].type, "torch_tpu: while_loop's body_fn returns ",
                  next[i].type.str(), " for carried value ", i, " of type ", carried[i].type.str());
    return concat(next, range(a, carried.size(), a.size()));
  });
  V out = b.emit_multi("stablehlo.while", state, "", types, {cond, body});
  return range(out, 0, carried.size());
}

// state = (step, carry..., stacked outputs..., xs..., extra...); step t reads xs[k][t]
// and writes output k at ys[k][t].
V lower_scan(Lowerer& lw, const py::list& args, const std::vector<TensorType>& outs) {
  hlo::Builder& b = lw.b;
  V init = operands(lw, args[1], "scan"), xs = operands(lw, args[2], "scan"),
    extra = operands(lw, args[3], "scan");
  TORCH_CHECK_NOT_IMPLEMENTED(!xs.empty(), "torch_tpu: scan without xs in a compiled graph");
  const int64_t length = xs[0].type.shape.empty() ? -1 : xs[0].type.shape[0];
  for (const Value& x : xs)
    TORCH_CHECK(!x.type.shape.empty() && x.type.shape[0] == length,
                "torch_tpu: scan's xs must "
                "all have the same size in the scanned dimension");
  const size_t nc = init.size(), ny = outs.size() - nc, nx = xs.size();
  V ys;
  for (size_t k = nc; k < outs.size(); ++k) ys.push_back(b.full(0, outs[k]));
  V state = concat(concat(concat(concat({b.constant_int(0, DType::S64)}, init), ys), xs), extra);
  std::vector<TensorType> types = types_of(state);
  std::string cond = b.region(types, [&](hlo::Builder& r, const V& a) {
    return V{r.compare(hlo::Compare::LT, a[0], r.constant_int(length, DType::S64))};
  });
  py::handle combine = args[0];
  std::string body = b.region(types, [&](hlo::Builder& r, const V& a) {
    const Value& step = a[0];
    Value zero = r.constant_int(0, DType::S64);
    auto at_step = [&](const TensorType& t) {
      std::vector<Value> starts(t.rank(), zero);
      starts[0] = step;
      return starts;
    };
    V sliced;
    for (size_t k = 0; k < nx; ++k) {
      const Value& x = a[1 + nc + ny + k];
      std::vector<int64_t> one = x.type.shape, rest(one.begin() + 1, one.end());
      one[0] = 1;
      sliced.push_back(r.reshape(r.dynamic_slice(x, at_step(x.type), one), rest));
    }
    V in = concat(concat(range(a, 1, 1 + nc), sliced), range(a, a.size() - extra.size(), a.size()));
    V res = lower_subgraph(r, combine, in);
    TORCH_CHECK(res.size() == nc + ny, "torch_tpu: scan's combine_fn returns ", res.size(),
                " values, expected ", nc + ny);
    V next{r.binary(hlo::Binary::Add, step, r.constant_int(1, DType::S64))};
    for (size_t k = 0; k < nc; ++k) next.push_back(res[k]);
    for (size_t k = 0; k < ny; ++k) {
      const Value& stacked = a[1 + nc + k];
      std::vector<int64_t> one = stacked.type.shape;
      one[0] = 1;
      next.push_back(
          r.dynamic_update_slice(stacked, r.reshape(res[nc + k], one), at_step(stacked.type)));
    }
    return concat(next, range(a, 1 + nc + ny, a.size()));
  });
  V out = b.emit_multi("stablehlo.while", state, "", types, {cond, body});
  return range(out, 1, 1 + nc + ny);
}

}  // namespace

bool is_structured(const std::string& name) { return !name.empty() && name[0] == '@'; }

std::vector<Value> lower_structured(Lowerer& lw, const std::string& name, const py::list& args,
                                    const std::vector<TensorType>& outs) {
  V results;
  if (name == "@cond") {
    results = lower_cond(lw, args, outs);
  } else if (name == "@while_loop") {
    results = lower_while(lw, args);
  } else if (name == "@scan") {
    results = lower_scan(lw, args, outs);
  } else if (name == "@optimization_barrier") {
    V in = operands(lw, args[0], "optimization_barrier");
    results =
        in.empty() ? in : lw.b.emit_multi("stablehlo.optimization_barrier", in, "", types_of(in));
  } else if (name == "@call_stablehlo") {
    // A jax_op: its export's functions join the module, main calls them.
    V in = operands(lw, args[2], "jax_op");
    lw.b.add_functions(py::cast<std::string>(args[0]));
    results = lw.b.emit_multi("func.call", in, "callee = @" + py::cast<std::string>(args[1]), outs);
  } else {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: no lowering for ", name.substr(1),
                                " in a compiled graph");
  }
  TORCH_CHECK(results.size() == outs.size(), "torch_tpu: ", name.substr(1), " gives ",
              results.size(), " results, the graph expects ", outs.size());
  for (size_t k = 0; k < outs.size(); ++k)
    TORCH_CHECK(results[k].type == outs[k], "torch_tpu: result ", k, " of ", name.substr(1), " is ",
                results[k].type.str(), ", the graph expects ", outs[k].str());
  return results;
}

}  // namespace torch_tpu::compile
