// Shadows Boost.Beast's own config header for targets given guestflow_forbid_asio()
// (common/layering/forbid_asio.cmake): Beast headers include it, so any Beast include in
// such a target fails here, naming the rule it breaks.
#error                                                                                         \
    "Boost.Beast included where the layering forbids it: no Asio or Beast type in a header that apps/ includes (CONTRIBUTING.md, Layers). Keep Beast inside the transport's .cpp files."
