import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericArrayData;
import org.apache.flink.table.data.GenericMapData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.data.binary.BinaryRowData;
import org.apache.flink.table.data.writer.BinaryRowWriter;
import org.apache.flink.table.data.writer.BinaryWriter;
import org.apache.flink.table.runtime.typeutils.InternalSerializers;
import org.apache.flink.types.RowKind;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.BinaryType;
import org.apache.flink.table.types.logical.BooleanType;
import org.apache.flink.table.types.logical.CharType;
import org.apache.flink.table.types.logical.DateType;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.DoubleType;
import org.apache.flink.table.types.logical.FloatType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LocalZonedTimestampType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.LogicalTypeRoot;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.MultisetType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.SmallIntType;
import org.apache.flink.table.types.logical.TimeType;
import org.apache.flink.table.types.logical.TimestampType;
import org.apache.flink.table.types.logical.TinyIntType;
import org.apache.flink.table.types.logical.VarBinaryType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.table.types.logical.utils.LogicalTypeChecks;

/**
 * BinaryRowData bytes written by Flink's own writers, the reference flinkstate's encoder is tested against
 * (tests/fixtures/flink-2.3-rowdata/rows.txt, `make_flink_fixture.py rowdata`): rows of one ROW type holding every
 * SQL type the state of SQL operators keeps, with nulls, empty values, negative numbers, strings of 7 and 8 bytes,
 * arrays of 0, 1, 32, 33 and 65 elements. A row's fields are written as the planner's generated projections write
 * them (CodeGenUtils.binaryWriterWriteNull: a null non-compact DECIMAL or TIMESTAMP keeps its reserved bytes;
 * BinaryWriter.write with the type's internal serializer otherwise: arrays and maps by ArrayDataSerializer and
 * MapDataSerializer), a nested row likewise.
 *
 * <pre>
 * RowDataWire OUT
 * </pre>
 *
 * OUT gets one line per row: the RowKind's short string, a tab, the row's bytes in hex.
 */
public class RowDataWire {

    static final RowType NESTED = RowType.of(new LogicalType[] {new IntType(), new VarCharType(9), new DecimalType(20, 0)},
            new String[] {"a", "b", "c"});

    static final RowType ROW = RowType.of(
            new BooleanType(), new TinyIntType(), new SmallIntType(), new IntType(), new BigIntType(), new FloatType(),
            new DoubleType(), new DecimalType(10, 2), new DecimalType(30, 5), new CharType(3), new VarCharType(100),
            new BinaryType(2), new VarBinaryType(50), new DateType(), new TimeType(0), new TimestampType(3),
            new TimestampType(9), new LocalZonedTimestampType(6), new ArrayType(new IntType()),
            new ArrayType(new VarCharType(20)), new MapType(new VarCharType(5), new DoubleType()),
            new MultisetType(new BigIntType()), NESTED, new ArrayType(new DecimalType(25, 2)),
            new ArrayType(new TimestampType(9)), new ArrayType(new BigIntType()));

    static StringData s(String v) {
        return StringData.fromString(v);
    }

    static DecimalData dec(String v, int p, int scale) {
        return DecimalData.fromBigDecimal(new BigDecimal(v), p, scale);
    }

    static TimestampData nanos(long epochNanos) {
        return TimestampData.fromEpochMillis(Math.floorDiv(epochNanos, 1_000_000L), (int) Math.floorMod(epochNanos, 1_000_000L));
    }

    static GenericArrayData ints(int n) {
        Object[] out = new Object[n];
        for (int i = 0; i < n; i++) {
            out[i] = i % 5 == 3 ? null : i - 16;
        }
        return new GenericArrayData(out);
    }

    static GenericArrayData longs(int n) {
        Object[] out = new Object[n];
        for (int i = 0; i < n; i++) {
            out[i] = (long) i * -1_000_000_007L;
        }
        return new GenericArrayData(out);
    }

    static GenericArrayData strings(int n) {
        Object[] out = new Object[n];
        for (int i = 0; i < n; i++) {
            out[i] = i % 3 == 2 ? null : s("s" + "x".repeat(i % 11));
        }
        return new GenericArrayData(out);
    }

    static GenericMapData map(Object... kv) {
        Map<Object, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return new GenericMapData(m);
    }

    /** A row of type t as the generated projections write it. */
    static BinaryRowData write(RowType t, Object[] values, RowKind kind) {
        BinaryRowData row = new BinaryRowData(t.getFieldCount());
        BinaryRowWriter w = new BinaryRowWriter(row);
        w.writeRowKind(kind);
        for (int i = 0; i < values.length; i++) {
            LogicalType ft = t.getTypeAt(i);
            Object v = values[i];
            if (v == null) {
                int p = ft.is(LogicalTypeRoot.DECIMAL) || ft.is(LogicalTypeRoot.TIMESTAMP_WITHOUT_TIME_ZONE)
                        || ft.is(LogicalTypeRoot.TIMESTAMP_WITH_LOCAL_TIME_ZONE) ? LogicalTypeChecks.getPrecision(ft) : 0;
                if (ft.is(LogicalTypeRoot.DECIMAL) && !DecimalData.isCompact(p)) {
                    w.writeDecimal(i, null, p);
                } else if (!ft.is(LogicalTypeRoot.DECIMAL) && p > 0 && !TimestampData.isCompact(p)) {
                    w.writeTimestamp(i, null, p);
                } else {
                    w.setNullAt(i);
                }
            } else {
                if (ft instanceof RowType) {
                    v = write((RowType) ft, (Object[]) v, RowKind.INSERT);
                }
                BinaryWriter.write(w, i, v, ft, InternalSerializers.create(ft));
            }
        }
        w.complete();
        return row;
    }

    public static void main(String[] args) throws Exception {
        List<Object[]> rows = new ArrayList<>();
        List<RowKind> kinds = new ArrayList<>();
        // every field set
        rows.add(new Object[] {true, (byte) -5, (short) 300, Integer.MAX_VALUE, Long.MIN_VALUE, 1.5f, -2.25,
            dec("12345678.91", 10, 2), dec("-123456789012345678901234.56789", 30, 5), s("abc"),
            s("a string longer than seven bytes \u2713"), new byte[] {0, 1}, "0123456789abcdef".getBytes(StandardCharsets.UTF_8),
            19782, 86_398_000, TimestampData.fromEpochMillis(1_704_164_645_678L), nanos(1_700_000_000_123_456_789L),
            nanos(-1_000L), new GenericArrayData(new Object[] {1, null, 3}),
            new GenericArrayData(new Object[] {s("x"), null, s("a much longer string here")}), map(s("k1"), 1.0, s("k2"), null),
            map(7L, 2, 8L, 1), new Object[] {1, s("inline"), dec("99999999999999999999", 20, 0)},
            new GenericArrayData(new Object[] {dec("1.25", 25, 2), null, dec("-1.28", 25, 2)}),
            new GenericArrayData(new Object[] {null, nanos(-123_456_789L)}), longs(3)});
        kinds.add(RowKind.INSERT);
        // empty values
        rows.add(new Object[] {false, (byte) 0, (short) 0, 0, 0L, 0.0f, 0.0, dec("0.00", 10, 2), dec("0.00000", 30, 5), s(""), s(""),
            new byte[0], new byte[0], 0, 0, TimestampData.fromEpochMillis(0), nanos(0), nanos(0), new GenericArrayData(new Object[0]),
            new GenericArrayData(new Object[0]), map(), map(), new Object[] {null, null, null}, new GenericArrayData(new Object[0]),
            new GenericArrayData(new Object[0]), new GenericArrayData(new Object[0])});
        kinds.add(RowKind.INSERT);
        // every field null
        rows.add(new Object[ROW.getFieldCount()]);
        kinds.add(RowKind.UPDATE_AFTER);
        // edges: negatives, BigInteger.toByteArray's shortest forms (-128, 127, -129), strings of 7 and 8 bytes, arrays
        // whose header is not a multiple of 8 bytes (33 and 65 elements)
        rows.add(new Object[] {null, (byte) -128, (short) -32768, Integer.MIN_VALUE, -1L, -0.0f, Double.NEGATIVE_INFINITY,
            dec("-0.01", 10, 2), dec("-0.00128", 30, 5), s("\u00e9t\u00e9"), s("seven!!"), new byte[] {-1}, new byte[] {1, 2, 3, 4, 5, 6, 7, 8},
            -719162, 0, TimestampData.fromEpochMillis(-62_135_596_800_000L), nanos(-1L), null, ints(33), strings(65),
            map(s("eight!!!"), -0.5), map(-1L, 1), new Object[] {-1, s("eight!!!"), dec("-128", 20, 0)},
            new GenericArrayData(new Object[] {dec("-1.29", 25, 2), dec("1.27", 25, 2)}), new GenericArrayData(new Object[] {nanos(1L)}),
            longs(65)});
        kinds.add(RowKind.DELETE);
        rows.add(new Object[] {true, (byte) 127, (short) 32767, -1, Long.MAX_VALUE, Float.NaN, 1e300, dec("99999999.99", 10, 2),
            dec("1280", 30, 5), s("xyz"), s("eight!!!"), new byte[] {0, 0}, new byte[0], 2_932_896, 1_000, null, null,
            nanos(7_258_118_399_999_999_000L), ints(32), strings(1), map(), map(), null, null, null, longs(1)});
        kinds.add(RowKind.UPDATE_BEFORE);
        StringBuilder out = new StringBuilder();
        for (int r = 0; r < rows.size(); r++) {
            BinaryRowData row = write(ROW, rows.get(r), kinds.get(r));
            byte[] bytes = new byte[row.getSizeInBytes()];
            row.getSegments()[0].get(row.getOffset(), bytes, 0, bytes.length);
            StringBuilder hex = new StringBuilder();
            for (byte b : bytes) {
                hex.append(String.format("%02x", b & 0xff));
            }
            out.append(kinds.get(r).shortString()).append('\t').append(hex).append('\n');
        }
        Files.write(Paths.get(args[0]), out.toString().getBytes(StandardCharsets.UTF_8));
    }
}
