"""Launches through a local function pointer to a kernel over a traits type (issue 15 item 3):
causal-conv1d's and mamba's ``auto kernel = &k<Ktraits>; kernel<<<grid, Ktraits::kNThreads,
kSmemSize>>>(params)``, ``Ktraits`` a local alias over the host's own template parameters, the
grid over struct fields, the constants compiled in cuda_sim (agent/host_consts.py)."""

import textwrap

from agent.case_guess import guess_case
from agent.host_consts import constant_compiler
from agent.host_launch import find_launches, matches
from agent.translate.macros import template_parts
from runners.sizeexpr import evaluate

DEVICE = textwrap.dedent("""\
    struct Params { int batch, dim, seqlen; };
    template <int kNThreads_, int kWidth_, bool kIsVec_, typename T_>
    struct Traits {
        using T = T_;
        static constexpr int kNThreads = kNThreads_;
        static constexpr int kWidth = kWidth_;
        static constexpr int kSmem = kNThreads_ * 4 * int(sizeof(T_)) + (kIsVec_ ? 0 : 16);
    };
    template <typename Kt>
    __global__ void fill(Params p, float *out) {
        extern __shared__ char smem_[];
        float *buf = reinterpret_cast<float *>(smem_);
        for (int i = threadIdx.x; i < Kt::kSmem / 4; i += blockDim.x) buf[i] = i;
        __syncthreads();
        if (threadIdx.x == 0)
            out[blockIdx.x * p.dim + blockIdx.y] = buf[Kt::kSmem / 4 - 1] + Kt::kWidth;
    }
    """)
HOST = textwrap.dedent("""\
    #define BOOL_SWITCH(COND, CONST_NAME, ...) [&] { if (COND) { \\
        constexpr static bool CONST_NAME = true; return __VA_ARGS__(); } else { \\
        constexpr static bool CONST_NAME = false; return __VA_ARGS__(); } }()
    template <int kNThreads, int kWidth, typename T>
    void fill_launch(Params &params, float *out, cudaStream_t stream) {
        BOOL_SWITCH(params.seqlen % 4 == 0, kIsVec, [&] {
            using Kt = Traits<kNThreads, kWidth, kIsVec, T>;
            constexpr int kSmemSize = Kt::kSmem;
            dim3 grid(params.batch, params.dim);
            auto kernel = &fill<Kt>;
            kernel<<<grid, Kt::kNThreads, kSmemSize, stream>>>(params, out);
        });
    }
    template <int kNThreads, typename T>
    void fill_rows(Params &params, float *out, cudaStream_t stream) {
        constexpr int kWidth = 2;
        typedef Traits<kNThreads, kWidth, false, T> Kt;
        void (*kernel)(Params, float *) = fill<Kt>;
        kernel<<<(params.seqlen + kNThreads - 1) / kNThreads, kNThreads, 0, stream>>>(params,
                                                                                     out);
    }
    template <int kNThreads, typename T>
    void fill_missing(Params &params, float *out) {
        using Kt = Traits<kNThreads, 3, false, T>;
        auto kernel = &fill<Kt>;
        kernel<<<params.batch, Kt::kMissing>>>(params, out);
    }
    """)
SIZES = {"batch": 2, "dim": 3, "seqlen": 100}


def _launches(kernel: str, sizes=SIZES, constants=None):
    return find_launches(DEVICE + HOST, kernel, template_parts(kernel)[1], sizes, constants)


def test_a_launch_through_a_local_function_pointer_binds_the_host_template_parameters():
    vec = "fill<Traits<128, 4, true, float>>"
    first, rows, missing = _launches(vec)
    assert (first.host, rows.host, missing.host) == ("fill_launch", "fill_rows", "fill_missing")
    # the traits alias over kNThreads, kWidth, the switch's kIsVec and T equals the given
    # type; fill_rows's own constant kWidth = 2 cannot be 4: not this instantiation
    given = template_parts(vec)[1]
    assert matches(first, given) and not matches(rows, given) and not matches(missing, given)
    assert [evaluate(g, SIZES) for g in first.grid] == [2, 3, 1]  # params.batch, params.dim
    # Kt::kNThreads is the traits' member, known to the compiler only (none given here)
    assert first.block is None and any("Kt::kNThreads" in p and "compiler" in p
                                       for p in first.problems)
    # `void (*kernel)(...) = fill<Kt>;` and a host template parameter bound to 32
    rows = _launches("fill<Traits<32, 2, false, float>>")[1]
    assert rows.usable, rows.problems
    assert [evaluate(g, SIZES) for g in rows.grid] == [4, 1, 1]
    assert [evaluate(b, SIZES) for b in rows.block] == [32, 1, 1]


def test_struct_fields_are_sizes_only_where_the_user_names_them():
    (first, *_) = _launches("fill<Traits<128, 4, true, float>>", sizes={"seqlen": 100})
    assert first.grid is None and any("params.batch" in p or "batch" in p
                                      for p in first.problems)


def test_constants_only_the_compiler_knows_are_compiled_in_cuda_sim():
    constants = constant_compiler(DEVICE, "traits.cu")
    first, _, _ = _launches("fill<Traits<128, 4, true, float>>", constants=constants)
    assert first.usable, first.problems
    assert [evaluate(b, SIZES) for b in first.block] == [128, 1, 1]
    assert evaluate(first.shared_mem, SIZES) == 128 * 4 * 4  # kNThreads_ * 4 * sizeof(float)
    first, _, missing = _launches("fill<Traits<32, 3, false, float>>", constants=constants)
    assert evaluate(first.shared_mem, SIZES) == 32 * 4 * 4 + 16
    # a member the traits do not have: an unread launch part, and the compiler's reason
    assert missing.block is None and any("Kt::kMissing" in p and "does not compile" in p
                                         and "kMissing" in p for p in missing.problems)


def test_a_guessed_case_takes_the_whole_launch_from_the_host(tmp_path):
    """Only the sizes given: the dynamic shared memory the kernel fills (a launch with 0
    bytes faults in cuda_sim), the block and the grid over the struct's fields come from
    the host launch."""
    (tmp_path / "fill.cu").write_text(DEVICE + HOST)
    case, guessed = guess_case(tmp_path / "fill.cu", "fill<Traits<64, 4, true, float>>",
                               tmp_path / "c", sizes={"batch": 2, "dim": 3, "seqlen": 8})
    sizes = {"batch": 2, "dim": 3, "seqlen": 8}
    assert [evaluate(str(g), sizes) for g in case.cuda.grid] == [2, 3, 1]
    assert [evaluate(str(b), sizes) for b in case.cuda.block] == [64, 1, 1]
    assert evaluate(str(case.cuda.shared_mem), sizes) == 64 * 4 * 4
    assert any(g.startswith("CUDA launch from the host code: fill_launch") for g in guessed)
