// Shadows Boost.Asio's own config header for targets given guestflow_forbid_asio()
// (common/layering/forbid_asio.cmake): every Asio header includes it, so any Asio include
// in such a target fails here, naming the rule it breaks.
#error                                                                                         \
    "Boost.Asio included where the layering forbids it: no Asio or Beast type in a header that apps/ includes (CONTRIBUTING.md, Layers). Keep Asio inside the transport's .cpp files."
