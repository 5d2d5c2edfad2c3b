// Package configfile decodes Skep's YAML configuration files strictly and
// reports what is wrong with them in one shape: file, line, column, field
// path and message, as Problems.
//
// Decode walks the yaml.Node tree into a Go struct by its yaml tags. An
// unknown key, a key written twice or a value of the wrong type is a
// Problem; custom types validate in UnmarshalYAML and their error becomes a
// Problem at their field. Decoding never stops at the first problem, so a
// user fixes a file in one go. The Document it returns remembers where each
// present field was written, so a caller's validation after decoding (Add)
// points at a line too.
//
// configfile must never log, and must never read files or the environment:
// it holds no secret and does no I/O. Its own messages quote a value only
// when Options.HideValues is false, because a secret pasted where its file
// name belongs would otherwise reach a log. A node budget bounds the work a
// small file of nested aliases can cause.
//
// A Document is not safe for concurrent use; Problems it returns are copies
// the caller owns.
package configfile
