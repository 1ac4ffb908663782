// The Java side of Bac's Java kernel: evaluates cells with the JDK's JShell API and
// reports each as JSON lines on stdout. Run by `python -m bac_kernel.jshell` as
// `java JShellHost.java` (the JDK compiles a single source file at launch).
//
// stdin, one command per line:  "eval <base64 of the cell>"  |  "stop"
// stdout, JSON lines:  {"type":"stream","name":"stdout"|"stderr","text":...}
//                      {"type":"result","text":...}          the last expression's value
//                      {"type":"error","ename":...,"evalue":...,"traceback":[...]}
//                      {"type":"done"}                        the cell is over
//
// Code runs in JShell's own agent JVM (the default remote execution), so `stop` ends a
// running cell and the state built so far is kept, as a notebook's interrupt does.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.JShellException;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;
import jdk.jshell.VarSnippet;

public class JShellHost {
    private static final PrintStream WIRE =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    private static synchronized void send(String json) {
        WIRE.print(json);
        WIRE.print('\n');
        WIRE.flush();
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }

    /** Bytes written by the cell's code, sent on as stream lines at each newline. */
    private static final class Forward extends OutputStream {
        private final String name;
        private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();

        Forward(String name) { this.name = name; }

        @Override public synchronized void write(int b) {
            buffer.write(b);
            if (b == '\n') flush();
        }

        @Override public synchronized void write(byte[] bytes, int off, int len) {
            buffer.write(bytes, off, len);
            for (int i = off; i < off + len; i++) {
                if (bytes[i] == '\n') { flush(); return; }
            }
        }

        @Override public synchronized void flush() {
            if (buffer.size() == 0) return;
            String text = buffer.toString(StandardCharsets.UTF_8);
            buffer.reset();
            send("{\"type\":\"stream\",\"name\":" + quote(name) + ",\"text\":" + quote(text) + "}");
        }
    }

    private static void error(String name, String value, List<String> traceback) {
        StringBuilder lines = new StringBuilder("[");
        for (int i = 0; i < traceback.size(); i++) {
            if (i > 0) lines.append(',');
            lines.append(quote(traceback.get(i)));
        }
        lines.append(']');
        send("{\"type\":\"error\",\"ename\":" + quote(name) + ",\"evalue\":" + quote(value)
                + ",\"traceback\":" + lines + "}");
    }

    private static void thrown(JShellException exception) {
        String name;
        if (exception instanceof EvalException eval) name = eval.getExceptionClassName();
        else if (exception instanceof UnresolvedReferenceException) name = "UnresolvedReferenceException";
        else name = exception.getClass().getName();
        String message = exception.getMessage() == null ? "" : exception.getMessage();
        List<String> trace = new ArrayList<>();
        trace.add(message.isEmpty() ? name : name + ": " + message);
        for (StackTraceElement frame : exception.getStackTrace()) {
            trace.add("\tat " + frame);
        }
        error(name, message, trace);
    }

    private static boolean isValue(Snippet snippet) {
        return snippet.kind() == Snippet.Kind.EXPRESSION
                || (snippet instanceof VarSnippet
                    && snippet.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND);
    }

    /** Evaluates a cell snippet by snippet; false once one failed (the rest is skipped). */
    private static void run(JShell shell, String code) {
        SourceCodeAnalysis analysis = shell.sourceCodeAnalysis();
        String remaining = code;
        String value = null;
        while (!remaining.isBlank()) {
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(remaining);
            String source;
            if (info.completeness().isComplete()) {
                source = info.source();
                remaining = info.remaining();
            } else {
                source = remaining;
                remaining = "";
            }
            value = null;
            for (SnippetEvent event : shell.eval(source)) {
                if (event.causeSnippet() != null) continue;
                if (event.exception() != null) {
                    thrown(event.exception());
                    return;
                }
                if (event.status() == Snippet.Status.REJECTED) {
                    List<String> messages = new ArrayList<>();
                    shell.diagnostics(event.snippet())
                            .filter(Diag::isError)
                            .forEach(d -> messages.add(d.getMessage(Locale.ROOT)));
                    if (messages.isEmpty()) messages.add("the snippet was rejected: " + source.strip());
                    error("CompilationException", String.join("\n", messages), messages);
                    return;
                }
                if (isValue(event.snippet())) value = event.value();
            }
        }
        if (value != null) send("{\"type\":\"result\",\"text\":" + quote(value) + "}");
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new Forward("stdout"), true, StandardCharsets.UTF_8);
        PrintStream err = new PrintStream(new Forward("stderr"), true, StandardCharsets.UTF_8);
        // The env var cells of Bac's server edit System.getenv()'s map by reflection.
        JShell shell = JShell.builder().out(out).err(err)
                .remoteVMOptions("--add-opens", "java.base/java.util=ALL-UNNAMED",
                                 "--add-opens", "java.base/java.lang=ALL-UNNAMED")
                .build();
        BlockingQueue<String> cells = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.equals("stop")) shell.stop();
                    else if (line.startsWith("eval ")) cells.put(line.substring(5));
                }
            } catch (Exception ignored) {
                // stdin closed or broken: the kernel is gone, so are we
            }
            System.exit(0);
        }, "commands");
        reader.setDaemon(true);
        reader.start();
        send("{\"type\":\"ready\"}");
        while (true) {
            String cell = new String(Base64.getDecoder().decode(cells.take()), StandardCharsets.UTF_8);
            try {
                run(shell, cell);
            } catch (RuntimeException e) {
                error(e.getClass().getName(), String.valueOf(e.getMessage()), List.of(e.toString()));
            }
            out.flush();
            err.flush();
            send("{\"type\":\"done\"}");
        }
    }
}
