import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Kafka command-line tools one after another in one JVM, so a test
 * that calls DumpLogSegments on a hundred files pays the JVM start once.
 *
 * Requests on stdin: a line with the argument count n, a line with the
 * tool's main class, then n lines, one argument each. Each answer on
 * stdout: "EXIT code outLen errLen\n", then what the tool wrote on
 * System.out (outLen bytes) and on System.err (errLen bytes). A tool's
 * call of Kafka's Exit.exit ends only the tool, with its code; an
 * exception its main throws ends it with code 1 and is printed as the
 * JVM prints an uncaught one (Exception in thread "main" and the trace).
 */
public final class ToolRunner {
    private static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    public static void main(String[] ignored) throws Exception {
        PrintStream out = System.out;
        PrintStream err = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Exit.setExitProcedure((code, message) -> {
            throw new ExitCalled(code);
        });
        Exit.setHaltProcedure((code, message) -> {
            throw new ExitCalled(code);
        });
        for (;;) {
            String count = in.readLine();
            if (count == null) {
                return;
            }
            int n = Integer.parseInt(count.trim());
            String cls = in.readLine();
            String[] args = new String[n];
            for (int i = 0; i < n; i++) {
                args[i] = in.readLine();
            }
            ByteArrayOutputStream toolOut = new ByteArrayOutputStream();
            ByteArrayOutputStream toolErr = new ByteArrayOutputStream();
            PrintStream po = new PrintStream(toolOut, true, StandardCharsets.UTF_8);
            PrintStream pe = new PrintStream(toolErr, true, StandardCharsets.UTF_8);
            System.setOut(po);
            System.setErr(pe);
            int code = 0;
            try {
                Class.forName(cls).getMethod("main", String[].class).invoke(null, (Object) args);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ExitCalled) {
                    code = ((ExitCalled) cause).code;
                } else {
                    pe.print("Exception in thread \"main\" ");
                    cause.printStackTrace(pe);
                    code = 1;
                }
            } catch (ReflectiveOperationException e) {
                e.printStackTrace(pe);
                code = 1;
            } finally {
                po.flush();
                pe.flush();
                System.setOut(out);
                System.setErr(err);
            }
            byte[] o = toolOut.toByteArray();
            byte[] e = toolErr.toByteArray();
            out.write(("EXIT " + code + " " + o.length + " " + e.length + "\n").getBytes(StandardCharsets.UTF_8));
            out.write(o);
            out.write(e);
            out.flush();
        }
    }
}
